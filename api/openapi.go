package api

import _ "embed"

// OpenAPI is the OpenAPI 3 document of this API, served at
// /api/v1/openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte
