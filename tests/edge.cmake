# Reliability at the edges: what users hit outside the core paths. Each test
# here failed before the fix it covers (issue "Reliability at the edges").
cm_test(edge_address_space edge_address_space.c)
cm_test(edge_huge edge_huge.c)
