/* Preloaded before Debian's libfaketime (0.9.10) when the tests step the wall clock with
 * FAKETIME_DONT_FAKE_MONOTONIC=1, as a real step leaves the monotonic clocks alone: that
 * libfaketime still shifts a clock_nanosleep() on CLOCK_MONOTONIC with TIMER_ABSTIME by its
 * offset (libfaketime issue 426), so Python's time.sleep() fails with EINVAL.  Sleeps on the
 * monotonic and boot clocks go to the kernel; every other one to the next library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int clock_nanosleep(clockid_t clock_id, int flags, const struct timespec *request, struct timespec *remain)
{
    if (clock_id == CLOCK_MONOTONIC || clock_id == CLOCK_MONOTONIC_RAW || clock_id == CLOCK_BOOTTIME) {
        return syscall(SYS_clock_nanosleep, clock_id, flags, request, remain) == 0 ? 0 : errno;
    }
    int (*next)(clockid_t, int, const struct timespec *, struct timespec *) =
        (int (*)(clockid_t, int, const struct timespec *, struct timespec *))dlsym(RTLD_NEXT, "clock_nanosleep");
    return next == NULL ? ENOSYS : next(clock_id, flags, request, remain);
}
