/* dump.c: what a core dump holds of our reservations.
 *
 * The kernel dumps an anonymous mapping whole once any page of it was
 * touched, and writes the pages never touched as zeros when the core goes
 * to a pipe, which is how systemd-coredump, apport and abrt receive it.
 * The arena's 64 GiB reservation made every crash stream 68.9 GB and take
 * 23 s to die, where glibc's core was 0.7 MB, and past systemd-coredump's
 * 2 GiB limit no backtrace is kept. So a large reservation is left out of
 * dumps when made (MADV_DONTDUMP, by its owner), and the part handed out is
 * put back (MADV_DODUMP) from the reservation's start to the highest
 * address used, rounded up to a step, so that a program's blocks are in
 * its core and the address space it never used is not. A thread frozen
 * between its CAS and its call leaves only its step out of dumps; nobody
 * waits for it. */
#include "internal.h"

void cm_dump_cover_slow(_Atomic uintptr_t *covered, uintptr_t start, uintptr_t used_end, uintptr_t limit,
                        size_t step) {
    uintptr_t cur = atomic_load_explicit(covered, memory_order_relaxed);
    for (;;) {
        uintptr_t from = cur > start ? cur : start;
        if (used_end <= from) return;
        uintptr_t to = start + ((used_end - start + step - 1) & ~(uintptr_t)(step - 1));
        if (to > limit) to = limit;
        /* relaxed: the CAS only decides which thread advises which part, and
         * every part is advised by one thread; nothing else is published */
        if (atomic_compare_exchange_weak_explicit(covered, &cur, to, memory_order_relaxed, memory_order_relaxed)) {
            cm_os_dump((void *)from, to - from, true);
            return;
        }
    }
}
