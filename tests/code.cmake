# The code space: executable memory in rel32 reach, W^X, and the tables that
# must live in .rodata.
cm_test(code_space code_space.c)
target_link_libraries(code_space PRIVATE ${CMAKE_DL_LIBS})
cm_sanitized_test(code_space code_space.c)

# The worked example: a tiny JIT calling C helpers with call rel32.
add_executable(example_tiny_jit ${CMAKE_SOURCE_DIR}/examples/tiny_jit.c)
target_compile_options(example_tiny_jit PRIVATE ${CM_TEST_FLAGS})
target_link_libraries(example_tiny_jit PRIVATE cagemalloc)
add_test(NAME example_tiny_jit COMMAND example_tiny_jit)

# Instance-independence: constant tables once in .rodata, no start-up code,
# little writable data; what the first allocation costs.
cm_script_test(tables_rodata tables_rodata.sh)
cm_test(init_cost init_cost.c)
