package modeltest

import (
	"encoding/json"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/tendrilai/tendril/internal/model"
)

// writeBedrockStream answers ConverseStream
// (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html)
// in the AWS event-stream encoding (application/vnd.amazon.eventstream;
// https://docs.aws.amazon.com/transcribe/latest/dg/event-stream.html): one
// binary message per event with the headers :message-type "event",
// :event-type (messageStart, contentBlockStart, contentBlockDelta,
// contentBlockStop, messageStop, metadata) and :content-type
// application/json, the event's JSON as payload. An in-stream failure
// (StreamCut with StreamErrorType, e.g. "throttlingException") is a
// message with :message-type "exception" and :exception-type.
func writeBedrockStream(w http.ResponseWriter, r *http.Request, reply Reply) {
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, r: r, delay: reply.ChunkDelay}
	enc := eventstream.NewEncoder()
	send := func(event string, payload any) bool {
		b, _ := json.Marshal(payload)
		var msg eventstream.Message
		msg.Headers.Set(":message-type", eventstream.StringValue("event"))
		msg.Headers.Set(":event-type", eventstream.StringValue(event))
		msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		msg.Payload = b
		return s.sendRaw(func() error { return enc.Encode(w, msg) })
	}
	if !send("messageStart", map[string]any{"role": "assistant"}) {
		return
	}
	idx := 0
	if reply.Text != "" {
		for i, piece := range split(reply.Text, reply.StreamChunks) {
			if reply.StreamCut > 0 && i == reply.StreamCut {
				if reply.StreamErrorType == "" {
					panic(http.ErrAbortHandler)
				}
				msgText := reply.ErrorMessage
				if msgText == "" {
					msgText = "stream failed: " + reply.StreamErrorType
				}
				b, _ := json.Marshal(map[string]any{"message": msgText})
				var msg eventstream.Message
				msg.Headers.Set(":message-type", eventstream.StringValue("exception"))
				msg.Headers.Set(":exception-type", eventstream.StringValue(reply.StreamErrorType))
				msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
				msg.Payload = b
				s.sendRaw(func() error { return enc.Encode(w, msg) })
				return
			}
			if !send("contentBlockDelta", map[string]any{"contentBlockIndex": idx, "delta": map[string]any{"text": piece}}) {
				return
			}
			s.text = true
		}
		if !send("contentBlockStop", map[string]any{"contentBlockIndex": idx}) {
			return
		}
		idx++
	}
	for _, tc := range reply.ToolCalls {
		if !send("contentBlockStart", map[string]any{"contentBlockIndex": idx, "start": map[string]any{"toolUse": map[string]any{"toolUseId": tc.ID, "name": tc.Name}}}) {
			return
		}
		for _, piece := range split(tc.Args, reply.StreamChunks) {
			if !send("contentBlockDelta", map[string]any{"contentBlockIndex": idx, "delta": map[string]any{"toolUse": map[string]any{"input": piece}}}) {
				return
			}
		}
		if !send("contentBlockStop", map[string]any{"contentBlockIndex": idx}) {
			return
		}
		idx++
	}
	if !send("messageStop", map[string]any{"stopReason": bedrockStop(reply.StopReason)}) {
		return
	}
	send("metadata", map[string]any{
		"usage":   map[string]any{"inputTokens": reply.InputTokens, "outputTokens": reply.OutputTokens, "totalTokens": reply.InputTokens + reply.OutputTokens},
		"metrics": map[string]any{"latencyMs": 1},
	})
}

func bedrockStop(r model.StopReason) string {
	stop := map[model.StopReason]string{
		model.StopEndTurn: "end_turn", model.StopToolUse: "tool_use", model.StopMaxTokens: "max_tokens",
		model.StopSequence: "stop_sequence", model.StopRefusal: "content_filtered",
	}[r]
	if stop == "" {
		stop = string(r)
	}
	return stop
}
