"""The pure core: values in, values out, no I/O (tests/test_layers.py); its map is docs/wings.md §1."""
