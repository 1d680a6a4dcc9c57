/*
 * Runs a Check suite and turns its result into main()'s exit status: the
 * same five lines every unit test's main() would otherwise repeat.
 */
#ifndef CK_RUN_H
#define CK_RUN_H

#include <check.h>
#include <stdlib.h>

static inline int ck_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
