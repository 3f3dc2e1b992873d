/* errors.h - every API error: code, HTTP status and default message from one list.
 * Replies are {"error":{"code","message","field"}}. */
#ifndef GANTRY_ERRORS_H
#define GANTRY_ERRORS_H

#define GANTRY_ERR_MAP(X)                                                                                                          \
    X(BAD_REQUEST, 400, "bad_request", "the request is malformed")                                                                 \
    X(INVALID_JSON, 400, "invalid_json", "the body is not valid JSON")                                                             \
    X(INVALID_FIELD, 400, "invalid_field", "a field is invalid")                                                                   \
    X(UNAUTHORIZED, 401, "unauthorized", "a valid bearer token is required")                                                       \
    X(FORBIDDEN, 403, "forbidden", "this token's role may not do this")                                                            \
    X(NOT_FOUND, 404, "not_found", "no such resource")                                                                             \
    X(METHOD_NOT_ALLOWED, 405, "method_not_allowed", "method not allowed on this path")                                            \
    X(CONFLICT, 409, "conflict", "the resource is not in a state that allows this")                                                \
    X(LENGTH_REQUIRED, 411, "length_required", "the body needs a Content-Length")                                                 \
    X(TOO_LARGE, 413, "payload_too_large", "the body is larger than allowed")                                                      \
    X(UNSUPPORTED_MEDIA, 415, "unsupported_media_type", "the body must be application/json")                                       \
    X(UNPROCESSABLE, 422, "unprocessable", "the request conflicts with an earlier one")                                            \
    X(RATE_LIMITED, 429, "rate_limited", "too many requests")                                                                      \
    X(INTERNAL, 500, "internal", "internal error")                                                                                 \
    X(UNAVAILABLE, 503, "unavailable", "the service is not ready")                                                                 \
    X(TIMEOUT, 504, "timeout", "the request took longer than allowed")

typedef enum {
#define X(name, status, code, msg) GERR_##name,
    GANTRY_ERR_MAP(X)
#undef X
        GERR__COUNT
} gerr;

int gerr_status(gerr e);
const char *gerr_code(gerr e);
const char *gerr_message(gerr e);

#endif
