# Unit tests of the internals, linked with the core objects.
cm_unit_test(unit_size_class unit_size_class.c)
cm_unit_test(unit_pagemap unit_pagemap.c)
cm_unit_test(unit_heap unit_heap.c)
cm_unit_test(unit_getrandom unit_getrandom.c)
cm_unit_test(unit_trim_aba unit_trim_aba.c)
cm_script_test(install_check install_check.sh)

add_executable(dlopen_check dlopen_check.c)
target_compile_options(dlopen_check PRIVATE ${CM_TEST_FLAGS})
target_link_libraries(dlopen_check PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)
add_dependencies(dlopen_check cagemalloc)
add_test(NAME dlopen_check COMMAND dlopen_check)
set_tests_properties(dlopen_check PROPERTIES ENVIRONMENT "${CM_TEST_ENV}" TIMEOUT 120)
