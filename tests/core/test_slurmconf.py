"""slurm.conf read as slurmctld reads it (slurm_dsl/core/slurmconf.py, docs/contract.md §13.8).
The expected settings are written out by hand from Slurm's parser rules (src/common/parse_config.c),
not computed."""

from __future__ import annotations

from typing import Dict, Union

import pytest

from slurm_dsl.core.durable import controllers, held_for, may_hand_back
from slurm_dsl.core.slurmconf import SlurmConf, Unreadable, read


def files(tree: Dict[str, str]):  # type: ignore[no-untyped-def]
    def include(name: str) -> Union[str, Unreadable]:
        return tree[name] if name in tree else Unreadable("no such file")

    return include


def test_the_last_of_a_repeated_key_counts_and_every_one_is_kept() -> None:
    conf = read("StateSaveLocation=/a\nstatesavelocation=/b\nSlurmctldHost=x\nSlurmctldHost=y\n", files({}))
    assert conf.last("StateSaveLocation") == "/b"
    assert conf.every("SLURMCTLDHOST") == ["x", "y"]
    assert conf.last("MessageTimeout") is None


def test_comments_continuations_quotes_and_several_pairs_on_a_line() -> None:
    text = ('# StateSaveLocation=/no\n'
            'ClusterName=c MessageTimeout=7 # a comment\n'
            'StateSaveLocation=/spool/\\#1\n'
            'SlurmctldHost=\\\n'
            'ctl-a\n'
            'SlurmctldParameters="a b"\n')
    conf = read(text, files({}))
    assert conf.settings == (("clustername", "c"), ("messagetimeout", "7"), ("statesavelocation", "/spool/#1"),
                             ("slurmctldhost", "ctl-a"), ("slurmctldparameters", "a b"))


def test_an_include_is_read_in_its_place_and_can_be_overridden_after() -> None:
    tree = {"/etc/slurm/a.conf": "StateSaveLocation=/inc\nSlurmctldHost=ctl-b\n",
            "c1.conf": "MessageTimeout=20\n"}
    text = ("ClusterName=C1\nSlurmctldHost=ctl-a\nStateSaveLocation=/top\ninclude /etc/slurm/a.conf\n"
            "Include %c.conf\n")
    conf = read(text, files(tree))
    assert conf.unreadable is None
    assert conf.last("StateSaveLocation") == "/inc"
    assert conf.every("SlurmctldHost") == ["ctl-a", "ctl-b"]
    assert conf.last("MessageTimeout") == "20"
    assert read(text + "StateSaveLocation=/after\n", files(tree)).last("StateSaveLocation") == "/after"


@pytest.mark.parametrize("text, why", [
    ("Include missing.conf\n", "Include missing.conf: no such file"),
    ("Include %c.conf\n", "%c with no ClusterName"),
    ("Include loop.conf\n", "nested deeper"),
])
def test_an_include_that_cannot_be_read_makes_the_whole_unreadable(text: str, why: str) -> None:
    conf = read(text + "StateSaveLocation=/x\n", files({"loop.conf": "Include loop.conf\n"}))
    assert conf.unreadable is not None and why in conf.unreadable
    assert conf.settings == ()


def test_a_glob_include_is_skipped_as_slurmctld_skips_it() -> None:
    conf = read("Include /etc/slurm/*.conf\nStateSaveLocation=/x\n", files({}))
    assert conf.unreadable is None and conf.last("StateSaveLocation") == "/x"


def test_the_controllers_follow_the_includes() -> None:
    """A common layout: the controllers in an included file.  Rule 5 and Rule 6 read them."""
    tree = {"ctl.conf": "SlurmctldHost=ctl-a(10.0.0.1)\nSlurmctldHost=ctl-b(10.0.0.2)\nSlurmctldPort=7000-7002\n"}
    conf = read("ClusterName=c\nInclude ctl.conf\nMessageTimeout=3\n", files(tree))
    assert may_hand_back(conf) is True
    assert controllers(conf) == (("10.0.0.1", 7000), ("10.0.0.2", 7000))
    assert held_for(conf) == 33.0
    one = read("ClusterName=c\nInclude one.conf\n", files({"one.conf": "SlurmctldHost=ctl\n"}))
    assert may_hand_back(one) is False
    assert controllers(one) == (("ctl", 6817),)


def test_what_cannot_be_read_may_hand_back_and_names_no_controller() -> None:
    assert may_hand_back(SlurmConf(unreadable="x")) is True
    assert controllers(SlurmConf(unreadable="x")) is None
    assert may_hand_back(None) is True
