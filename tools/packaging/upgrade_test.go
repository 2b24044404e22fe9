package packaging

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// dpkgRoot is an empty dpkg installation under a scratch directory, for
// dpkg --root.
type dpkgRoot struct {
	t    *testing.T
	root string
}

func newDpkgRoot(t *testing.T) *dpkgRoot {
	t.Helper()
	root := t.TempDir()
	admin := filepath.Join(root, "var", "lib", "dpkg")
	for _, d := range []string{"info", "updates", "triggers"} {
		if err := os.MkdirAll(filepath.Join(admin, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"status", "available"} {
		if err := os.WriteFile(filepath.Join(admin, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return &dpkgRoot{t: t, root: root}
}

// install runs dpkg -i on deb into the root and returns what dpkg and the
// maintainer scripts printed. The scripts run outside a chroot, with
// DPKG_ROOT set (the postinst reads its files under it); a changed
// conffile is kept, as an operator who answers the prompt N does.
func (d *dpkgRoot) install(deb string) string {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "dpkg", "--root="+d.root, "--force-script-chrootless", "--force-confdef", "--force-confold",
		"--log=/dev/null", "-i", deb).CombinedOutput()
	if err != nil {
		d.t.Fatalf("dpkg --root -i %s: %v\n%s", filepath.Base(deb), err, out)
	}
	return string(out)
}

// version is the version of oidcd installed in the root.
func (d *dpkgRoot) version() string {
	d.t.Helper()
	return strings.TrimSpace(command(d.t, "dpkg-query", "--admindir="+filepath.Join(d.root, "var", "lib", "dpkg"), "-W", "-f=${Version}", PackageName))
}

// TestUpgradeInstallsOverThePreviousRelease installs, with dpkg into a
// scratch root, a package versioned as the newest release of RELEASES,
// then this tree's package over it, as an operator upgrading a host does.
// The package's version is the build's (tools/version.sh) and dpkg takes
// it as an upgrade: no "downgrading" warning, the new version recorded,
// the new binary in place, the operator's edit of the configuration kept,
// and the postinst's upgrade note; installing the old one again is a
// downgrade, so dpkg did compare. The previous release's own tree is not
// built: its package's version is what matters here, and cmd/oidcd
// TestRollingUpgradeFromThePreviousRelease runs its binary.
func TestUpgradeInstallsOverThePreviousRelease(t *testing.T) {
	needDpkgDeb(t)
	needDpkg(t)
	if os.Geteuid() != 0 {
		t.Skip("dpkg --root installs files owned by root: run as root (a container) to run the upgrade test")
	}
	release, _ := newestRelease(t)
	build := buildVersion(t, versionScript)
	oldVersion, newVersion := DebVersion(release), DebVersion(build)
	if newVersion != build {
		t.Errorf("the package's version %q is not the build's %q", newVersion, build)
	}
	if oldVersion == newVersion {
		t.Skipf("this tree is the newest release, %s: there is nothing to upgrade from", release)
	}
	if !dpkgLess(t, oldVersion, newVersion) {
		t.Fatalf("dpkg --compare-versions: %s is not greater than the newest release's %s", newVersion, oldVersion)
	}

	work := t.TempDir()
	bin := buildBinary(t, work, build)
	debs := map[string]string{}
	for _, v := range []string{release, build} {
		deb, err := Build(context.Background(), Options{Binary: bin, Version: v, RepoRoot: repoRoot, Out: filepath.Join(work, DebVersion(v)+".deb")})
		if err != nil {
			t.Fatal(err)
		}
		fields := command(t, "dpkg-deb", "--field", deb, "Version")
		if got := strings.TrimSpace(fields); got != DebVersion(v) {
			t.Errorf("the package of %s: control Version %q, want %q", v, got, DebVersion(v))
		}
		debs[v] = deb
	}

	d := newDpkgRoot(t)
	if out := d.install(debs[release]); !strings.Contains(out, "installed but not started") {
		t.Errorf("first install: no next steps from the postinst:\n%s", out)
	}
	conf := filepath.Join(d.root, ConfigPath)
	edited := `issuer = "https://id.example.com"` + "\n"
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(edited)
	f.Close()

	out := d.install(debs[build])
	if strings.Contains(out, "downgrading") || !strings.Contains(out, "Unpacking oidcd ("+newVersion+") over ("+oldVersion+")") {
		t.Errorf("upgrade from %s to %s: dpkg said\n%s", oldVersion, newVersion, out)
	}
	if !strings.Contains(out, "upgraded from "+oldVersion) {
		t.Errorf("upgrade: no note from the postinst:\n%s", out)
	}
	if got := d.version(); got != newVersion {
		t.Errorf("installed version after the upgrade: got %q, want %q", got, newVersion)
	}
	if b, _ := os.ReadFile(conf); !strings.HasSuffix(string(b), edited) {
		t.Errorf("the upgrade lost the operator's edit of %s", ConfigPath)
	}
	if out := command(t, filepath.Join(d.root, BinaryPath), "version"); !strings.HasPrefix(out, "oidcd "+build+" ") {
		t.Errorf("oidcd version after the upgrade: got %q, want oidcd %s", out, build)
	}

	if out := d.install(debs[release]); !strings.Contains(out, "downgrading oidcd from "+newVersion+" to "+oldVersion) {
		t.Errorf("installing %s over %s: dpkg did not call it a downgrade:\n%s", oldVersion, newVersion, out)
	}
}
