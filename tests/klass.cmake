# The class space: narrow class pointers, metadata in the alignment gaps.
cm_test(klass_space klass_space.c)
cm_sanitized_test(klass_space klass_space.c)
cm_script_test(klass_disasm klass_disasm.sh)

# The worked example of a compact object header, built and run.
add_executable(example_compact_header ${CMAKE_SOURCE_DIR}/examples/compact_header.c)
target_compile_options(example_compact_header PRIVATE ${CM_TEST_FLAGS})
target_link_libraries(example_compact_header PRIVATE cagemalloc)
add_test(NAME example_compact_header COMMAND example_compact_header)
