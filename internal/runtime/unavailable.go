package runtime

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"net/url"
	"regexp"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tendrilai/tendril/internal/agent"
)

// Unavailable reports whether err says that a dependency could not be
// reached, so that the request may succeed once it is back (503 NOT_READY,
// not 500): agent.ErrNotReady (the assistant's own readiness checks), a
// PostgreSQL connection that could not be opened or broke
// (*pgconn.ConnectError, pgconn.ErrConnClosed, a pgconn timeout, or a
// server error of SQLSTATE class 08 "connection exception", 57P
// "operator intervention" — the server shutting down — or 53300 "too many
// connections"), or a failed network operation (*net.OpError: a dial,
// read or write, as Redis and a lost database socket report them).
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var (
		ce *pgconn.ConnectError
		oe *net.OpError
		pe *pgconn.PgError
	)
	switch {
	case errors.Is(err, agent.ErrNotReady), errors.As(err, &ce), errors.Is(err, pgconn.ErrConnClosed),
		pgconn.Timeout(err), errors.As(err, &oe):
		return true
	case errors.As(err, &pe):
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P") || pe.Code == "53300"
	}
	return false
}

// databaseUnavailable is Unavailable narrowed to PostgreSQL's own errors
// (no *net.OpError, which a model call's failure also holds).
func databaseUnavailable(err error) bool {
	var (
		ce *pgconn.ConnectError
		pe *pgconn.PgError
	)
	switch {
	case errors.As(err, &ce), errors.Is(err, pgconn.ErrConnClosed), pgconn.Timeout(err):
		return true
	case errors.As(err, &pe):
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P") || pe.Code == "53300"
	}
	return false
}

// SafeMessage returns err's text for a client that is not the operator:
// the text of a failed connection or network operation, which names the
// user, database, host and port, is replaced by what failed and why
// ("cannot connect to the database (connection refused)", "dial failed
// (connection refused)"), and postgres:// and redis:// URLs are cut to their
// scheme. Errors that reach it only as text (wrapped with %v) are caught
// by the same patterns. Log err itself for the details.
func SafeMessage(err error) string {
	msg := err.Error()
	walk(err, func(e error) {
		var repl string
		switch e := e.(type) {
		case *pgconn.ConnectError:
			repl = "cannot connect to the database" + because(e)
		case *pgconn.ParseConfigError:
			repl = "invalid database URL"
		case *net.OpError:
			repl = e.Op + " failed" + because(e)
		case *net.DNSError:
			repl = "lookup failed" + because(e)
		case *url.Error:
			// an HTTP client's error names the endpoint it called (a
			// model, an embedder): "Post \"http://10.0.0.5/v1/…\": …"
			repl = e.Op + " " + endpointOf(e.URL) + ": " + SafeMessage(e.Err)
		case *fs.PathError:
			// the file's path tells a caller how the host is laid out
			repl = e.Op + ": " + e.Err.Error()
		default:
			return
		}
		if s := e.Error(); s != "" {
			msg = strings.ReplaceAll(msg, s, repl)
		}
	})
	if loc := pgConnectText.FindStringIndex(msg); loc != nil {
		msg = msg[:loc[0]] + "cannot connect to the database" + becauseText(msg[loc[0]:])
	}
	msg = netOpText.ReplaceAllString(msg, "$1: ")
	msg = lookupText.ReplaceAllString(msg, "lookup: ")
	msg = urlText.ReplaceAllString(msg, "$1://…")
	msg = httpCallText.ReplaceAllString(msg, "$1 an $2 endpoint: ")
	return msg
}

// endpointOf is how an error shows an endpoint it called: its scheme
// only ("an https endpoint"), without host, port or path.
func endpointOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" {
		return "an " + u.Scheme + " endpoint"
	}
	return "an endpoint"
}

var (
	// pgconn's ConnectError: "failed to connect to `user=U database=D`:
	// HOST:PORT (HOST): dial error: …", always the end of the text.
	pgConnectText = regexp.MustCompile("failed to connect to `[^`]*`:")
	// net.OpError: "dial tcp 10.0.0.5:5432: ", "read tcp A->B: ".
	netOpText = regexp.MustCompile(`\b(dial|read|write|close) (?:tcp|udp|ip|unix)[0-9a-z]* \S+: `)
	// net.DNSError: "lookup db.internal on 127.0.0.53:53: ".
	lookupText = regexp.MustCompile(`\blookup \S+(?: on \S+)?: `)
	urlText    = regexp.MustCompile(`\b(postgres|postgresql|redis|rediss)://\S+`)
	// url.Error kept as text: `Post "http://10.0.0.5:8000/v1/…": `.
	httpCallText = regexp.MustCompile(`\b(Get|Head|Post|Put|Patch|Delete|Options) "([a-z][a-z0-9+.-]*)://[^"]*": `)
)

// because names err's cause in a few words that carry no address:
// " (connection refused)", " (timeout)", " (SQLSTATE 28P01)", or "".
func because(err error) string {
	var (
		errno syscall.Errno
		pe    *pgconn.PgError
		dns   *net.DNSError
		ne    net.Error
	)
	switch {
	case errors.As(err, &errno):
		return " (" + errno.Error() + ")"
	case errors.As(err, &pe):
		return " (SQLSTATE " + pe.Code + ")"
	case errors.As(err, &dns) && dns.IsNotFound:
		return " (no such host)"
	case pgconn.Timeout(err), errors.As(err, &ne) && ne.Timeout():
		return " (timeout)"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return " (connection closed)"
	}
	return ""
}

// becauseText is because for an error known only by its text.
func becauseText(s string) string {
	for _, c := range []string{"connection refused", "connection reset by peer", "no such host", "i/o timeout", "timeout", "network is unreachable", "no route to host"} {
		if strings.Contains(s, c) {
			return " (" + c + ")"
		}
	}
	if m := sqlstateText.FindString(s); m != "" {
		return " (" + m + ")"
	}
	return ""
}

var sqlstateText = regexp.MustCompile(`SQLSTATE [0-9A-Z]{5}`)

// walk calls fn on err and every error it wraps, outermost first.
func walk(err error, fn func(error)) {
	if err == nil {
		return
	}
	fn(err)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		walk(u.Unwrap(), fn)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walk(e, fn)
		}
	}
}
