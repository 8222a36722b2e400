package schemaregistry

import (
	"fmt"
	"net/http"
)

// Error is an API error in Confluent's shape: {"error_code": 40401,
// "message": "..."}. The HTTP status is the code's first three digits
// (40401 -> 404, 42201 -> 422, 50001 -> 500) and the code itself when it
// has three digits (409, 415).
type Error struct {
	Code    int    `json:"error_code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("schemaregistry: %d: %s", e.Code, e.Message) }

// Status is the HTTP status the error is served with.
func (e *Error) Status() int {
	c := e.Code
	for c >= 1000 {
		c /= 10
	}
	if c < 100 || c > 599 {
		return http.StatusInternalServerError
	}
	return c
}

// The error codes of Confluent's Schema Registry that this server returns.
const (
	CodeSubjectNotFound            = 40401
	CodeVersionNotFound            = 40402
	CodeSchemaNotFound             = 40403
	CodeSubjectSoftDeleted         = 40404
	CodeSubjectNotSoftDeleted      = 40405
	CodeVersionSoftDeleted         = 40406
	CodeVersionNotSoftDeleted      = 40407
	CodeSubjectCompatNotConfigured = 40408
	CodeIncompatibleSchema         = 409
	CodeUnsupportedMediaType       = 415
	CodeInvalidSchema              = 42201
	CodeInvalidVersion             = 42202
	CodeInvalidCompatibilityLevel  = 42203
	CodeInvalidMode                = 42204
	CodeOperationNotPermitted      = 42205
	CodeReferenceExists            = 42206
	CodeInvalidSubject             = 42208
	CodeStoreError                 = 50001
	CodeOperationTimeout           = 50002
	CodeJSONParseError             = 50005
	CodeUnprocessableEntity        = 422
	CodeUnauthorized               = 401
	CodeNotFound                   = 404
	CodeMethodNotAllowed           = 405
)

func apiErr(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func subjectNotFound(subject string) *Error {
	return apiErr(CodeSubjectNotFound, "Subject '%s' not found.", subject)
}

func versionNotFound(subject string, version int) *Error {
	return apiErr(CodeVersionNotFound, "Version %d not found for subject '%s'.", version, subject)
}

func schemaNotFound(id int) *Error {
	return apiErr(CodeSchemaNotFound, "Schema %d not found", id)
}
