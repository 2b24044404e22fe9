package chrometest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Timeout bounds everything done with the context that New returns: once it
// has passed, every action on that context fails and the test with it.
const Timeout = 2 * time.Minute

// ActionTimeout bounds one call of Do.
const ActionTimeout = 30 * time.Second

// startTimeout bounds starting the browser process.
const startTimeout = 60 * time.Second

// Path is where New looks for the browser first: Debian's chromium package
// (scripts/ensure-chromium.sh installs it).
const Path = "/usr/bin/chromium"

// findBrowser returns the browser executable, or "" when there is none.
func findBrowser() string {
	if p := os.Getenv("OIDCD_CHROMIUM"); p != "" {
		return p
	}
	if _, err := os.Stat(Path); err == nil {
		return Path
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// New starts a fresh headless browser with one tab and returns the tab's
// context. The browser has its own profile under t.TempDir(), resolves no
// host name but 127.0.0.1's, and is stopped by t.Cleanup. The context ends
// after Timeout. Without a browser the test is skipped, or fails when the
// environment variable CI is "true".
func New(t testing.TB) context.Context {
	t.Helper()
	exe := findBrowser()
	if exe == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium not found at %s (run scripts/ensure-chromium.sh)", Path)
		}
		t.Skipf("chromium not found at %s; run scripts/ensure-chromium.sh", Path)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-proxy-server", true),
		// Only ever talk to 127.0.0.1 (localhost too, which WebAuthn needs:
		// it refuses an IP address as relying-party id); every other host
		// name fails to resolve.
		chromedp.Flag("host-resolver-rules", "MAP localhost 127.0.0.1, MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx,
		chromedp.WithErrorf(func(format string, args ...any) {
			t.Logf("chromedp: "+format, args...)
		}))

	// The first Do starts the browser and binds its life to browserCtx, so
	// it must not carry a deadline of its own; a timer bounds it instead.
	started := make(chan struct{})
	timedOut := make(chan struct{})
	go func() {
		select {
		case <-started:
		case <-time.After(startTimeout):
			close(timedOut)
			cancelBrowser()
		}
	}()
	err := chromedp.Do(browserCtx)
	close(started)
	select {
	case <-timedOut:
		err = fmt.Errorf("not started within %v: %w", startTimeout, err)
	default:
	}
	if err != nil {
		cancelBrowser()
		cancelAlloc()
		t.Fatalf("chrometest: start %s: %v", exe, err)
	}

	ctx, cancel := context.WithTimeout(browserCtx, Timeout)
	t.Cleanup(func() {
		cancel()
		if err := chromedp.Cancel(browserCtx); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("chrometest: stop browser: %v", err)
		}
		cancelBrowser()
		cancelAlloc() // waits for the browser process to exit
	})
	return ctx
}

// Do runs the actions in the tab of ctx, each call bounded by ActionTimeout,
// and fails the test with the page's address when one fails.
func Do(t testing.TB, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, ActionTimeout)
	defer cancel()
	if err := chromedp.Do(actx, steps...); err != nil {
		t.Fatalf("chrometest: at %s: %v", location(ctx), err)
	}
}

// Click clicks the first element matching the CSS selector (a submit
// button, a link) and waits until the page it leads to has loaded; it
// returns that page's HTTP status. Use it, not chromedp.Click, for every
// click that navigates: a query run right after a plain Click can bind to
// the page being left and wait forever.
func Click(t testing.TB, ctx context.Context, css string) int {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, ActionTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(actx, chromedp.Click(chromedp.CSS(css), chromedp.NodeVisible))
	if err != nil {
		t.Fatalf("chrometest: click %q at %s: %v", css, location(ctx), err)
	}
	if resp == nil {
		t.Fatalf("chrometest: click %q at %s: no navigation", css, location(ctx))
	}
	return int(resp.Status)
}

// Location returns the address of the tab's current page, or fails the test.
func Location(t testing.TB, ctx context.Context) string {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, ActionTimeout)
	defer cancel()
	u, err := chromedp.Run(actx, chromedp.Location())
	if err != nil {
		t.Fatalf("chrometest: location: %v", err)
	}
	return u
}

// WaitLocation waits up to 20 s until the tab's address starts with
// prefix, and returns it; else it fails the test.
func WaitLocation(t testing.TB, ctx context.Context, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		loc := Location(t, ctx)
		if strings.HasPrefix(loc, prefix) {
			return loc
		}
		if time.Now().After(deadline) {
			t.Fatalf("chrometest: still at %s, want %s...", loc, prefix)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Open navigates the tab to u and returns the page's HTTP status, or
// fails the test.
func Open(t testing.TB, ctx context.Context, u string) int {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, ActionTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(actx, chromedp.Navigate(u))
	if err != nil || resp == nil {
		t.Fatalf("chrometest: open %s: %v", u, err)
	}
	return int(resp.Status)
}

// Text returns the text of the first element matching the CSS selector, or
// fails the test.
func Text(t testing.TB, ctx context.Context, css string) string {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, ActionTimeout)
	defer cancel()
	s, err := chromedp.Run(actx, chromedp.Text(chromedp.CSS(css)))
	if err != nil {
		t.Fatalf("chrometest: text of %q at %s: %v", css, location(ctx), err)
	}
	return s
}

func location(ctx context.Context) string {
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u, err := chromedp.Run(actx, chromedp.Location())
	if err != nil {
		return "(unknown page)"
	}
	return u
}

// Screenshot writes a full-page PNG of the tab to
// $OIDCD_SCREENSHOTS/<name>.png when that variable is set, else under
// t.TempDir(), and logs the path. name must be a plain file name without
// extension.
func Screenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		t.Fatalf("chrometest: screenshot name %q: want a plain file name", name)
	}
	dir := os.Getenv("OIDCD_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("chrometest: %v", err)
	}
	actx, cancel := context.WithTimeout(ctx, ActionTimeout)
	defer cancel()
	png, err := chromedp.Run(actx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("chrometest: screenshot %s at %s: %v", name, location(ctx), err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("chrometest: %v", err)
	}
	t.Logf("screenshot %s", path)
}
