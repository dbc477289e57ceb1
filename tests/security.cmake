# Reliability and security: misuse, exhaustion, fuzzing, soak, interposition,
# real programs.
cm_test(sec_misuse sec_misuse.c)
cm_test(sec_exhaust sec_exhaust.c)
