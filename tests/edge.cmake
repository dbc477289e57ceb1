# Reliability at the edges: what users hit outside the core paths. Each test
# here failed before the fix it covers (issue "Reliability at the edges").
if(CAGEMALLOC_HARDENING) # the free tag exists only with hardening
  cm_test(edge_free_tag edge_free_tag.c)
endif()
cm_test(edge_exit_churn edge_exit_churn.c)
target_link_libraries(edge_exit_churn PRIVATE ${CMAKE_DL_LIBS})
cm_test(edge_huge edge_huge.c)
cm_test(edge_address_space edge_address_space.c)
cm_test(edge_grow_calls edge_grow_calls.c)
cm_script_test(edge_arena_rlimit edge_arena_rlimit.sh)
cm_dlopen_test(edge_dlclose edge_dlclose.c)
cm_test(edge_first_call edge_first_call.c)
cm_test(edge_settings edge_settings.c)
cm_test(edge_exports edge_exports.c)
target_link_libraries(edge_exports PRIVATE ${CMAKE_DL_LIBS})
cm_test(edge_idle_owner edge_idle_owner.c)
cm_sanitized_test(edge_idle_owner edge_idle_owner.c)
foreach(t edge_idle_owner edge_idle_owner_tsan edge_idle_owner_asan)
  if(TEST ${t}) # its decay rounds wait out CAGEMALLOC_DECAY_MS
    get_test_property(${t} ENVIRONMENT env)
    set_tests_properties(${t} PROPERTIES ENVIRONMENT "${env};CAGEMALLOC_DECAY_MS=100")
  endif()
endforeach()
