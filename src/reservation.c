/* reservation.c: the large reservations (the arena, the descriptor region,
 * the cage, the class space, the code ranges) are opened as they are used.
 *
 * Each is made closed (PROT_NONE) and opened, read-write or as its views
 * need, from its start up to the highest address handed out, rounded up to
 * a step. The kernel neither dumps the closed part of an anonymous mapping
 * (never touched, it has no pages) nor populates it under mlockall; a code
 * range's views, shared file mappings, are dumped whole even closed, so
 * they are also left out of dumps (MADV_DONTDUMP) and put back as opened.
 * Two things a read-write reservation did to its programs, measured before:
 *  - core dumps: the kernel dumps an anonymous mapping whole once a page of
 *    it was touched and writes the untouched pages as zeros into the pipe
 *    through which systemd-coredump, apport and abrt receive cores; a crash
 *    streamed 68.9 GB and took 23 s to die (glibc 0.7 MB; systemd-coredump
 *    keeps no backtrace past 2 GiB);
 *  - mlockall(MCL_CURRENT | MCL_FUTURE), as ntpd, corosync, linuxptp and
 *    real-time audio programs call it, populates and locks every readable
 *    or writable mapping: a 1 GiB arena became 1.18 GB resident at once,
 *    the 64 GiB one more than the machine has.
 *
 * A thread opens what it needs itself before it uses it: from the open end
 * it read up to its own end, then raises the open end if it is still
 * below. Threads racing over one step each make the same call, which is
 * harmless; a thread frozen between its call and its CAS leaves the open
 * end where it was, and the next thread opens that part again. Nobody waits
 * for anybody. */
#include "internal.h"

bool cm_reservation_open_slow(cm_reservation_t *r, uintptr_t start, uintptr_t used_end, uintptr_t limit) {
    uintptr_t cur = atomic_load_explicit(&r->opened, memory_order_acquire);
    uintptr_t from = cur > start ? cur : start;
    if (used_end <= from) return true;
    uintptr_t to = start + ((used_end - start + r->step - 1) & ~(uintptr_t)(r->step - 1));
    if (to > limit) to = limit;
    if (!cm_os_open((void *)from, to - from, r->prot, r->file_view)) return false;
    cm_reservation_opened(r, to);
    return true;
}

void cm_reservation_opened(cm_reservation_t *r, uintptr_t end) {
    uintptr_t cur = atomic_load_explicit(&r->opened, memory_order_relaxed);
    /* release: a thread that reads the new end and uses memory below it
     * does so after the mprotect that opened it returned; a failed CAS
     * re-reads the end and stops once it is at or past ours */
    while (cur < end &&
           !atomic_compare_exchange_weak_explicit(&r->opened, &cur, end, memory_order_release, memory_order_relaxed)) {
    }
}
