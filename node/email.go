package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/oidcd/oidcd/email"
	"github.com/oidcd/oidcd/internal/mail"
)

// Mail to people (docs/operators/email.md): the flags become the
// destinations of the leader's delivery of the replicated outbox, which
// every node builds and only the leader runs.

// mailDestinations builds where messages go from the configuration: the
// site's relay (--smtp-url), the outbox file (--email-outbox), or both,
// in that order; none when mail is off.
func mailDestinations(c *Config) ([]mail.Sender, error) {
	var out []mail.Sender
	if c.SMTPURL != "" {
		mc, err := mail.ParseURL(c.SMTPURL, c.SMTPFrom, c.SMTPCAFile)
		if err != nil {
			return nil, mailFlagError(c, err)
		}
		relay, err := mail.NewSMTP(mc)
		if err != nil {
			return nil, fmt.Errorf("--smtp-url: %v", err)
		}
		out = append(out, relay)
	}
	if c.EmailOutbox != "" {
		out = append(out, mail.NewOutbox(c.EmailOutbox))
	}
	return out, nil
}

// mailFlagError names the flag whose value mail.ParseURL refused. The
// error never holds the URL, which may carry the relay's password.
func mailFlagError(c *Config, err error) error {
	var ce *mail.ConfigError
	if !errors.As(err, &ce) {
		return fmt.Errorf("--smtp-url: %v", err)
	}
	switch ce.Field {
	case mail.FieldFrom:
		return fmt.Errorf("--smtp-from %q: %v (want an address such as \"Example ID <id@example.com>\")", c.SMTPFrom, ce.Err)
	case mail.FieldCAFile:
		return fmt.Errorf("--smtp-ca-file %q: %v", c.SMTPCAFile, unwrapPathError(ce.Err))
	default:
		return fmt.Errorf("--smtp-url: %v (want smtp://[user:password@]host[:port], STARTTLS required, or smtps://...)", ce.Err)
	}
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// mailProblems are the mail flags' problems, for Validate: a relay URL
// that does not parse, a relay without a From address, a CA file that
// holds no certificate, a From or CA file without a relay, an outbox file
// in a directory that is not there.
func (c *Config) mailProblems() []error {
	var errs []error
	switch {
	case c.SMTPURL != "" && c.SMTPFrom == "":
		errs = append(errs, errors.New("--smtp-url needs --smtp-from: the From address of every message"))
	case c.SMTPURL != "":
		if _, err := mailDestinations(&Config{SMTPURL: c.SMTPURL, SMTPFrom: c.SMTPFrom, SMTPCAFile: c.SMTPCAFile}); err != nil {
			errs = append(errs, err)
		}
	default:
		for _, f := range [][2]string{{"--smtp-from", c.SMTPFrom}, {"--smtp-ca-file", c.SMTPCAFile}} {
			if f[1] != "" {
				errs = append(errs, fmt.Errorf("%s is set without --smtp-url: no relay would use it", f[0]))
			}
		}
	}
	if c.EmailOutbox != "" {
		dir := filepath.Dir(c.EmailOutbox)
		if st, err := os.Stat(dir); (err != nil || !st.IsDir()) && !sameDir(dir, c.DataDir) { // the data dir is made at start
			errs = append(errs, fmt.Errorf("--email-outbox %q: its directory %s does not exist", c.EmailOutbox, dir))
		} else if st, err := os.Stat(c.EmailOutbox); err == nil && !st.Mode().IsRegular() {
			errs = append(errs, fmt.Errorf("--email-outbox %q: not a regular file", c.EmailOutbox))
		}
	}
	return errs
}

// sameDir reports whether paths a and b name the same directory.
func sameDir(a, b string) bool {
	a, errA := filepath.Abs(a)
	b, errB := filepath.Abs(b)
	return errA == nil && errB == nil && a == b
}

// buildMail builds the delivery of the outbox and registers its metrics
// (they watch the queue on every node, with mail on or off).
func (n *Node) buildMail() error {
	dests, err := mailDestinations(&n.cfg)
	if err != nil {
		return err
	}
	n.mail, err = email.NewSender(email.SenderConfig{
		State: n.fsm.State(), Applier: n.cluster, KEK: n.kek, Mail: dests, Now: n.cfg.Now, Logger: n.log, Registerer: n.registry,
	})
	if err != nil {
		return err
	}
	var relay string
	if n.cfg.SMTPURL != "" {
		mc, _ := mail.ParseURL(n.cfg.SMTPURL, n.cfg.SMTPFrom, n.cfg.SMTPCAFile) // parsed above
		scheme := "smtp (STARTTLS)"
		if mc.Implicit {
			scheme = "smtps"
		}
		relay = scheme + " " + mc.Host + ":" + strconv.Itoa(mc.Port) // never the password
	}
	switch {
	case len(dests) == 0:
		n.log.Info("mail to people is off: no --smtp-url or --email-outbox")
	case relay == "":
		n.log.Info("mail to people goes to the outbox file only", "outbox", n.cfg.EmailOutbox)
	case n.cfg.EmailOutbox == "":
		n.log.Info("mail to people goes through the relay", "relay", relay)
	default:
		n.log.Info("mail to people goes through the relay and to the outbox file", "relay", relay, "outbox", n.cfg.EmailOutbox)
	}
	return nil
}

// demoMailLine is the demo banner's line that says where mail to people
// goes ("" when the demo has no outbox file).
func (n *Node) demoMailLine() string {
	if n.cfg.EmailOutbox == "" {
		return ""
	}
	path := n.cfg.EmailOutbox
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return fmt.Sprintf("  mail to people (invitations, password resets): %s, one JSON line a message;\n"+
		"    tail -f it, try %s/password/forgot, and follow the link\n", path, n.cfg.Issuer)
}
