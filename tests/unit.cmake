# Unit tests of the internals, linked with the core objects.
cm_unit_test(unit_size_class unit_size_class.c)
cm_unit_test(unit_pagemap unit_pagemap.c)
cm_unit_test(unit_heap unit_heap.c)
cm_unit_test(unit_getrandom unit_getrandom.c)
cm_unit_test(unit_trim_aba unit_trim_aba.c)
cm_unit_test(unit_bounds unit_bounds.c)
cm_script_test(install_check install_check.sh)
cm_dlopen_test(dlopen_check dlopen_check.c)
