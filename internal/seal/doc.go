// Package seal protects state that travels through the browser (a pending
// authorization request, its step and CSRF binding) with AES-256-GCM under a
// cluster-wide key, so any node can continue a flow another node began
// without a replicated write per page.
//
// A sealed value names its purpose (bound as additional data, so a value
// sealed for one purpose cannot be replayed as another) and its expiry.
package seal
