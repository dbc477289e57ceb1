/* init.c: process-wide initialisation, done by the first allocation.
 *
 * No thread ever waits for another to finish initialising: every step is a
 * CAS race, in which losers undo their own work (descriptor region, secrets,
 * exit key) or, for settings, simply find the value already written.
 * Each racer completes every step itself before it allocates. */
#include "internal.h"

_Atomic int cm_initialized;
uintptr_t cm_link_key;
#ifdef CM_TEST_HOOKS
void (*volatile cm_test_hook)(const char *point);
#endif

/* Publish the random link key exactly once; every racer ends with the
 * winner's value (never 0: its top 16 bits are the tag, CM_FREE_TAG), so
 * links encoded by any thread decode in every other. Says where this
 * racer's bytes came from. */
static const char *init_link_key(void) {
    uintptr_t mine = 0, none = 0;
    if (__atomic_load_n(&cm_link_key, __ATOMIC_ACQUIRE)) return "another thread's initialisation";
    bool strong = cm_os_random(&mine, sizeof mine);
    mine = (mine & (((uintptr_t)1 << 48) - 1)) | (uintptr_t)CM_FREE_TAG << 48;
    __atomic_compare_exchange_n(&cm_link_key, &none, mine, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return strong ? "getrandom" : "AT_RANDOM, the pid and the clock: getrandom failed";
}

/* Reserve the descriptor region. Under an address-space limit, which
 * counts it whole, one descriptor per 8 KiB of the limit (each serves a
 * superblock of 64 KiB or more, or a large block), not as many as fit: a
 * 32 MiB region of a 60 MB limit left 18 MB to allocate. Smaller still if
 * the reservation fails. Descriptor 0 is never handed out; its map_size
 * records the capacity. */
static bool init_descriptor_region(void) {
    if (cm_desc_started()) return true;
    uint32_t first = CM_MAX_DESCRIPTORS;
    size_t limit = cm_os_address_limit();
    while (first > CM_MIN_DESCRIPTORS && (size_t)first * 8192 > limit) first >>= 1;
    for (uint32_t capacity = first; capacity >= CM_MIN_DESCRIPTORS; capacity >>= 2)
        if (cm_desc_make_region(capacity)) return true; /* committed is counted as descriptors are handed out */
    return false;
}

void cm_init_slow(void) {
    cm_os_init();
    cm_options_load();
    const char *secret_source = init_link_key();
    if (!init_descriptor_region()) return; /* out of address space: every allocation fails with ENOMEM */
    cm_arena_reserve();
    cm_thread_global_init();
    /* release: a thread that sees the flag sees everything above; the one
     * racer that sets it reports (so the report is printed once) */
    int none = 0;
    if (atomic_compare_exchange_strong_explicit(&cm_initialized, &none, 1, memory_order_release,
                                                memory_order_relaxed) &&
        CM_OPTION(verbose))
        cm_stats_verbose_init(secret_source, cm_os_clock_in_vdso() ? "clock_gettime in the vDSO"
                                                                   : "clock_gettime system call (no vDSO found)");
}
