// Command tendril-relay is the AWS Lambda function between the outside
// world and a Tendril on Amazon Bedrock AgentCore Runtime: API Gateway
// delivers Telegram webhook updates to it and EventBridge Scheduler its
// schedules, and it calls InvokeAgentRuntime for each (aws-sdk-go-v2
// bedrockagentcore). Tendril, inside the runtime, replies through the
// Telegram Bot API.
//
// Environment:
//
//	AGENT_RUNTIME_ARN          the runtime to invoke (required)
//	AGENT_RUNTIME_QUALIFIER    its endpoint name (default: DEFAULT)
//	TELEGRAM_WEBHOOK_SECRET    the webhook secret Telegram sends (required for webhooks)
//	RELAY_TIMEOUT              bound of one invocation, e.g. 25s
//
// plus the standard AWS variables (AWS_REGION, and
// AWS_ENDPOINT_URL_BEDROCK_AGENTCORE to point at another endpoint).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore"

	"github.com/tendrilai/tendril/internal/awsbody"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	r, err := fromEnv(context.Background(), os.Getenv)
	if err != nil {
		log.Error("tendril-relay: configuration", "err", err)
		os.Exit(1)
	}
	r.Log = log
	lambda.Start(r.Handle)
}

// fromEnv builds the relay from the environment.
func fromEnv(ctx context.Context, get func(string) string) (*Relay, error) {
	arn := get("AGENT_RUNTIME_ARN")
	if arn == "" {
		return nil, fmt.Errorf("AGENT_RUNTIME_ARN is required")
	}
	r := &Relay{RuntimeARN: arn, Qualifier: get("AGENT_RUNTIME_QUALIFIER"), WebhookSecret: get("TELEGRAM_WEBHOOK_SECRET")}
	if v := get("RELAY_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("RELAY_TIMEOUT %q: want a duration such as 25s", v)
		}
		r.Timeout = d
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	r.Client = bedrockagentcore.NewFromConfig(cfg, func(o *bedrockagentcore.Options) {
		// See package awsbody: without it a response can die mid-read.
		o.HTTPClient = awsbody.Guard(o.HTTPClient)
	})
	return r, nil
}
