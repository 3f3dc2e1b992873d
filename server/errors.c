/* errors.c - the API's errors: code, status and message from one list (errors.h). */
#include "server/errors.h"

static const struct {
    int status;
    const char *code, *msg;
} table[] = {
#define X(name, status, code, msg) {status, code, msg},
    GANTRY_ERR_MAP(X)
#undef X
};

int gerr_status(gerr e)
{
    return table[e].status;
}
const char *gerr_code(gerr e)
{
    return table[e].code;
}
const char *gerr_message(gerr e)
{
    return table[e].msg;
}
