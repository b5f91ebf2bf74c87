// Package api holds cipherd's wire contract: the routes, the JSON request and
// response types, the error codes and the headers of the streaming routes. It
// imports no HTTP framework, so that servers, clients and tests share one
// definition.
//
// JSON byte fields ([]byte) travel as standard base64, as encoding/json
// encodes them.
package api
