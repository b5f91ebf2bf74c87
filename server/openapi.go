package server

import _ "embed"

// openAPIDocument is the OpenAPI 3.1 description of the API.
//
//go:embed openapi.json
var openAPIDocument []byte
