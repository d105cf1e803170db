package runtime

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tendrilai/tendril/internal/agent"
)

// waitInvoker reports one approval wait before answering, as the
// assistant does for a turn queued behind a paused one.
type waitInvoker struct{ recInvoker }

type waitKey struct{}

func (w *waitInvoker) WithApprovalWait(ctx context.Context, report func(agent.PendingApproval)) context.Context {
	return context.WithValue(ctx, waitKey{}, report)
}

func (w *waitInvoker) Invoke(ctx context.Context, req agent.Request) (*agent.Result, error) {
	if report, _ := ctx.Value(waitKey{}).(func(agent.PendingApproval)); report != nil {
		p := agent.PendingApproval{RequestID: "01ABC", ToolName: "notes", Args: `{"action":"add"}`, ExpiresAt: 1700000000}
		report(p)
		p.Status = "denied"
		report(p)
	}
	return w.recInvoker.Invoke(ctx, req)
}

// A streamed turn sends each approval it waits behind as an
// "approval_wait" frame, and its decision as an "approval_decided" frame,
// after "start" and before the reply.
func TestSSEApprovalWaitFrame(t *testing.T) {
	ts := newTestServer(t, &waitInvoker{}, Options{})
	req, _ := http.NewRequest("POST", ts.URL+"/invocations", strings.NewReader(`{"message":"hi","actor_id":"a"}`))
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var types []string
	var wait, decided map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var f map[string]any
		if err := json.Unmarshal([]byte(data), &f); err != nil {
			t.Fatal(err)
		}
		if len(types) == 0 || types[len(types)-1] != f["type"] {
			types = append(types, f["type"].(string))
		}
		if f["type"] == "approval_wait" {
			wait, _ = f["approval"].(map[string]any)
		}
		if f["type"] == "approval_decided" {
			decided, _ = f["approval"].(map[string]any)
		}
	}
	if got := strings.Join(types, ","); got != "start,approval_wait,approval_decided,delta,final" {
		t.Fatalf("frames %s", got)
	}
	if _, ok := wait["status"]; ok || decided["request_id"] != "01ABC" || decided["status"] != "denied" {
		t.Fatalf("approval_wait %v, approval_decided %v", wait, decided)
	}
	if wait["request_id"] != "01ABC" || wait["tool_name"] != "notes" || wait["args"] != `{"action":"add"}` || wait["expires_at"] != float64(1700000000) {
		t.Fatalf("approval_wait frame %v", wait)
	}
	// Without streaming the JSON answer is unchanged.
	if _, out := post(t, ts.URL, `{"message":"hi","actor_id":"a"}`, nil); out["ok"] != true {
		t.Fatalf("JSON answer %v", out)
	}
}
