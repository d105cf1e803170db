package agentrunner_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/schedule"
	"github.com/tendrilai/tendril/internal/schedule/agentrunner"
)

type invoker struct {
	got []agent.Request
	res *agent.Result
	err error
}

func (i *invoker) Invoke(ctx context.Context, req agent.Request) (*agent.Result, error) {
	i.got = append(i.got, req)
	return i.res, i.err
}

func TestRunJob(t *testing.T) {
	j := schedule.Job{ID: "J1", Name: "morning", Kind: schedule.KindCron, Task: "check the greenhouse", ActorID: "telegram:9",
		Channel: "telegram", ChatID: "9", SessionID: "s1", NextRun: time.Date(2026, 6, 1, 6, 0, 0, 0, time.UTC)}
	tests := []struct {
		name    string
		res     *agent.Result
		err     error
		want    string
		wantErr bool
	}{
		{"reply", &agent.Result{Text: "Open the vents today."}, nil, "Open the vents today.", false},
		{"nothing due", &agent.Result{Text: "NOTHING_DUE"}, nil, "NOTHING_DUE", false},
		{"approval pending result", &agent.Result{PendingApproval: &agent.PendingApproval{RequestID: "r"}}, nil, schedule.NothingDue, false},
		{"approval pending error", nil, fmt.Errorf("turn: %w", agent.ErrApprovalPending), schedule.NothingDue, false},
		{"model error", nil, errors.New("MODEL_ERROR"), "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := &invoker{res: tt.res, err: tt.err}
			got, err := agentrunner.New(inv).RunJob(context.Background(), j)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("RunJob = %q, %v; want %q, err %v", got, err, tt.want, tt.wantErr)
			}
			req := inv.got[0]
			if req.Message != j.Task || req.InvocationType != "cron" || req.Channel != "telegram" || req.ActorID != "telegram:9" ||
				req.SessionID != "s1" || req.Metadata["job_id"] != "J1" || req.Metadata["chat_id"] != "9" ||
				req.Metadata["scheduled_for"] != "2026-06-01T06:00:00Z" {
				t.Fatalf("request %+v", req)
			}
		})
	}
	if ch := agentrunner.Request(schedule.Job{Task: "x"}).Channel; ch != "cron" {
		t.Errorf("channel of a job without one = %q, want cron", ch)
	}
}
