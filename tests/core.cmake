# Core tests: C and C++ API conformance, multi-threaded stress, remote frees,
# thread churn, the first use from several threads at once, fork,
# lock-freedom under frozen threads, and the symbol and disassembly checks of
# the shared library.
cm_test(core_api core_api.c)
cm_test(core_cxx core_cxx.cpp)
target_compile_options(core_cxx PRIVATE -fsized-deallocation) # clang 14 leaves it off by default
cm_test(core_stress core_stress.c)
cm_sanitized_test(core_stress core_stress.c)
cm_test(core_xthread core_xthread.c)
cm_sanitized_test(core_xthread core_xthread.c)
cm_test(core_quiet_handoff core_quiet_handoff.c)
cm_sanitized_test(core_quiet_handoff core_quiet_handoff.c)
cm_test(core_churn core_churn.c)
cm_test(core_first_use core_first_use.c)
cm_sanitized_test(core_first_use core_first_use.c)
cm_test(core_fork core_fork.c)
cm_test(core_freeze core_freeze.c)
cm_script_test(core_symbols core_symbols.sh)
cm_script_test(core_disasm core_disasm.sh)
cm_script_test(core_programs core_programs.sh)
cm_test(heap_api heap_api.c)
cm_sanitized_test(heap_api heap_api.c)
cm_test(core_trim_free_blocks core_trim_free_blocks.c)
cm_sanitized_test(core_trim_free_blocks core_trim_free_blocks.c)
cm_test(cage_api cage_api.c)
cm_sanitized_test(cage_api cage_api.c)
cm_script_test(cage_disasm cage_disasm.sh)
cm_test(cage_member cage_member.cpp)
