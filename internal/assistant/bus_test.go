package assistant

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/model/modeltest"
	"github.com/tendrilai/tendril/internal/testenv"
)

// A reply delivered on one instance (a turn resumed after an approval
// there) reaches the listeners of every instance on the database, once
// each, whole (past NOTIFY's 8,000-byte payload), and only the actor's.
// Before, only listeners of the instance that resumed the turn heard it.
func TestDeliveriesReachEveryInstance(t *testing.T) {
	url := testenv.PostgresSchema(t)
	t.Setenv("TENDRIL_DATABASE_URL", url)
	fake := modeltest.NewOpenAI(t)
	a := openTestApp(t, fake)
	b := openTestApp(t, fake)
	ctx := context.Background()

	listening := make(chan struct{}, 1)
	a.bus.listen(func() { listening <- struct{}{} })
	select {
	case <-listening:
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		t.Fatal("instance a never listened")
	}
	onA, stopA, _ := a.Subscribe("api:ana")
	defer stopA()
	otherOnA, stopOther, _ := a.Subscribe("api:bob")
	defer stopOther()
	onB, stopB, _ := b.Subscribe("api:ana")
	defer stopB()

	long := strings.Repeat("the figs by the south wall need water. ", 500) // 19,500 bytes
	if err := b.Deliver(ctx, "api", "api:ana", nil, long); err != nil {
		t.Fatal(err)
	}
	recv := func(name string, ch <-chan Delivery) Delivery {
		t.Helper()
		select {
		case d := <-ch:
			return d
		case <-time.After(time.Minute): // a hang guard
			t.Fatalf("%s heard nothing", name)
		}
		return Delivery{}
	}
	if d := recv("instance a", onA); d.Text != long || d.ActorID != "api:ana" || d.Channel != "api" {
		t.Errorf("instance a heard %+.80v", d)
	}
	if d := recv("instance b", onB); d.Text != long {
		t.Errorf("instance b heard %+.80v", d)
	}
	// A second delivery proves the first came once: each listener's next
	// one is the second, not a copy of the first.
	if err := b.Deliver(ctx, "api", "api:ana", nil, "second"); err != nil {
		t.Fatal(err)
	}
	if d := recv("instance a", onA); d.Text != "second" {
		t.Errorf("instance a's next delivery %.80q, want the second", d.Text)
	}
	if d := recv("instance b", onB); d.Text != "second" {
		t.Errorf("instance b's next delivery %.80q, want the second (its own once, not again through the database)", d.Text)
	}
	select {
	case d := <-otherOnA:
		t.Errorf("another actor's listener heard %.80q", d.Text)
	default:
	}
	// Forget takes the actor's deliveries with it.
	if _, err := b.Forget(ctx, ForgetRequest{ActorID: "api:ana"}); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := a.db.QueryRow(ctx, `SELECT count(*) FROM tendril_deliveries WHERE payload->>'actor_id' = 'api:ana'`).Scan(&left); err != nil || left != 0 {
		t.Errorf("after forget %d deliveries of the actor are stored (%v), want 0", left, err)
	}
}
