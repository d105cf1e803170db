package pg

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// A server that takes the TCP connection and never answers (a hung host,
// a black-holed proxy) fails a new connection within
// DefaultConnectTimeout when the URL sets none; before, acquiring one
// waited until the kernel gave up, minutes later, and so did every
// request on it.
func TestConnectToSilentServerTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	url := "postgres://tendril@" + ln.Addr().String() + "/x?sslmode=disable"
	cfg, err := poolConfig(url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	done := make(chan error, 1)
	go func() {
		c, err := pool.Acquire(context.Background()) // no deadline of its own
		if err == nil {
			c.Release()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a connection to a server that never answers was handed out")
		}
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		t.Fatal("acquiring a connection to a silent server never returned")
	}
	if c, err := poolConfig(url+"&connect_timeout=30", Options{}); err != nil || c.ConnConfig.ConnectTimeout != 30*time.Second {
		t.Errorf("connect_timeout in the URL: %v, %v; want it kept", c.ConnConfig.ConnectTimeout, err)
	}
}
