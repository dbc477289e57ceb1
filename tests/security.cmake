# Reliability and security: misuse, exhaustion, fuzzing, soak, interposition,
# real programs.
cm_test(sec_misuse sec_misuse.c)
cm_test(sec_exhaust sec_exhaust.c)
add_executable(sec_soak sec_soak.c)
target_compile_options(sec_soak PRIVATE ${CM_TEST_FLAGS})
target_link_libraries(sec_soak PRIVATE cagemalloc Threads::Threads)
add_test(NAME sec_soak COMMAND sec_soak 60)
set_tests_properties(sec_soak PROPERTIES TIMEOUT 200)
cm_script_test(sec_fuzz sec_fuzz.sh)
set_tests_properties(sec_fuzz PROPERTIES SKIP_RETURN_CODE 77)
