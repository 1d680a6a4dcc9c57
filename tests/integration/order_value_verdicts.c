/*
 * Prints, one line per argument, what vc_order_value_parse() makes of it: the
 * state letter of an order's value, or "-" for a value it refuses. The test
 * test_order_value_lua.sh compares the scripts' parser (common/lua/order_value.lua)
 * with it, the one parser of C, on the same values.
 */
#include <stdio.h>
#include <string.h>

#include "vc_order_value.h"

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        vc_order_value_t o;

        if (vc_order_value_parse(argv[i], strlen(argv[i]), &o) == 0)
            printf("%c\n", o.state);
        else
            printf("-\n");
    }
    return 0;
}
