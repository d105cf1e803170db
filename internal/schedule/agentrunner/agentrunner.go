// Package agentrunner adapts the agent turn (agent.Invoker) to
// schedule.Runner: a job's run is a normal turn with invocation_type=cron
// (SPEC §7.2). The agent then retrieves memory with the fallback query
// "tasks due: <task>".
package agentrunner

import (
	"context"
	"errors"
	"time"

	"github.com/tendrilai/tendril/internal/agent"
	"github.com/tendrilai/tendril/internal/schedule"
)

// Runner runs jobs as agent turns.
type Runner struct {
	inv agent.Invoker
}

var _ schedule.Runner = (*Runner)(nil)

// New returns a Runner over inv.
func New(inv agent.Invoker) *Runner { return &Runner{inv: inv} }

// Request builds the turn for j: Message is the task (the agent prefixes
// "tasks due: " for retrieval), Channel the job's channel ("cron" if none),
// InvocationType "cron", and Metadata carries job_id, job_name, job_kind,
// chat_id, scheduled_for (RFC 3339) and nothing_due (the sentinel the model
// answers with when there is nothing to tell).
func Request(j schedule.Job) agent.Request {
	ch := j.Channel
	if ch == "" {
		ch = "cron"
	}
	return agent.Request{
		Message:        j.Task,
		ActorID:        j.ActorID,
		SessionID:      j.SessionID,
		Channel:        ch,
		InvocationType: "cron",
		Metadata: map[string]any{
			"job_id":        j.ID,
			"job_name":      j.Name,
			"job_kind":      string(j.Kind),
			"chat_id":       j.ChatID,
			"scheduled_for": j.NextRun.Format(time.RFC3339),
			"nothing_due":   schedule.NothingDue,
		},
	}
}

// RunJob implements schedule.Runner. A turn that paused at the approval
// gate counts as done with nothing to deliver: the approval flow finishes
// the turn and replies on its channel, and retrying would ask again.
func (r *Runner) RunJob(ctx context.Context, j schedule.Job) (string, error) {
	res, err := r.inv.Invoke(ctx, Request(j))
	if errors.Is(err, agent.ErrApprovalPending) {
		return schedule.NothingDue, nil
	}
	if err != nil {
		return "", err
	}
	if res == nil || res.PendingApproval != nil {
		return schedule.NothingDue, nil
	}
	return res.Text, nil
}
