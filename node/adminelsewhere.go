package node

import (
	"net/http"

	"github.com/oidcd/oidcd/internal/httpx"
)

// adminElsewhereMessage is what the public listener answers for the admin
// API's paths when --admin-addr gives that API a listener of its own. It
// names the flag, not the address: the public side need not learn where
// the admin side listens.
const adminElsewhereMessage = "the admin API is not served on this address: this node serves it on its --admin-addr " +
	"(admin-addr in the configuration file; oidcd admin --addr <that address>)"

// adminElsewhere registers, on the public mux of a node whose admin API
// has its own listener, a 404 for /admin/v1/ in the admin API's error
// envelope that says so, instead of the mux's bare "404 page not found":
// `oidcd admin` prints it, so an operator who aimed the CLI at the public
// address learns why. routes() calls it when separateAdmin() holds.
func adminElsewhere(public *http.ServeMux) {
	public.HandleFunc("/admin/v1/", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteError(w, r, http.StatusNotFound, httpx.CodeNotFound, adminElsewhereMessage)
	})
}
