// Package docs holds the project's interface documents, in its own words:
// the OpenAPI 3.1 descriptions of the relying-party surface
// (openapi/oidc.json, served at /openapi.json) and of the admin API
// (openapi/admin.json, served at /admin/v1/openapi.json), and the pages for
// application developers and operators. openapi_test.go checks both
// documents against the responses of a real node.
package docs

import _ "embed"

// OIDC is the OpenAPI document of the relying-party surface.
//
//go:embed openapi/oidc.json
var OIDC []byte

// Admin is the OpenAPI document of the admin API.
//
//go:embed openapi/admin.json
var Admin []byte
