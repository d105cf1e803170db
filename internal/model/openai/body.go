package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"

	"github.com/tendrilai/tendril/internal/model"
)

// The request body of Generate is encoded here rather than by the SDK: the
// SDK's reflection over its union parameter types was the largest single
// CPU and allocation cost of a turn with a fast model (about 1,000
// allocations and 100 KiB for a 40-message request). The wire shape is the one toParams gives the SDK (system
// message first, tool results as "tool" messages before the rest of a user
// message, plain string content unless a message carries an image); the
// tests compare the two encodings.

// encodeRequest is the JSON body of a Chat Completions request for req, in
// a fresh slice: {"messages":[...],"model":...,"max_tokens":...,
// "temperature":...,"tools":[...]}, the optional fields only when set.
// Errors are those of toParams: a tool whose input schema is not a JSON
// object, an image without data, a block not allowed in its message.
func encodeRequest(req *model.Request) ([]byte, error) {
	n := len(req.System) + 256
	for _, m := range req.Messages {
		for _, b := range m.Content {
			n += len(b.Text) + len(b.Input) + 4*len(b.Data)/3 + 64
		}
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.InputSchema) + 64
	}
	b := make([]byte, 0, n)
	b = append(b, `{"messages":[`...)
	first := true
	if req.System != "" {
		b = append(b, `{"role":"system","content":`...)
		b = appendString(b, req.System)
		b = append(b, '}')
		first = false
	}
	for i, m := range req.Messages {
		var err error
		if b, err = appendMessages(b, m, &first); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
	}
	b = append(b, `],"model":`...)
	b = appendString(b, req.Model)
	if req.MaxTokens > 0 {
		b = append(b, `,"max_tokens":`...)
		b = strconv.AppendInt(b, int64(req.MaxTokens), 10)
	}
	if req.Temperature != nil {
		t, err := json.Marshal(*req.Temperature)
		if err != nil {
			return nil, fmt.Errorf("temperature: %w", err)
		}
		b = append(b, `,"temperature":`...)
		b = append(b, t...)
	}
	for i, t := range req.Tools {
		if i == 0 {
			b = append(b, `,"tools":[`...)
		} else {
			b = append(b, ',')
		}
		b = append(b, `{"type":"function","function":{"name":`...)
		b = appendString(b, t.Name)
		if t.Description != "" {
			b = append(b, `,"description":`...)
			b = appendString(b, t.Description)
		}
		if s := bytes.TrimSpace(t.InputSchema); len(s) > 0 && !bytes.Equal(s, []byte("null")) {
			c, ok := compactSchema(s)
			if !ok {
				return nil, fmt.Errorf("tool %q: input_schema is not a JSON object", t.Name)
			}
			b = append(b, `,"parameters":`...)
			b = append(b, c...)
		}
		b = append(b, "}}"...)
		if i == len(req.Tools)-1 {
			b = append(b, ']')
		}
	}
	return append(b, '}'), nil
}

// schemas caches compactSchema: a turn sends the same few tool schemas
// every time. At most maxSchemas entries; it starts over when full.
var schemas = struct {
	sync.Mutex
	m map[string][]byte
}{m: map[string][]byte{}}

const maxSchemas = 256

// compactSchema is the JSON object s without insignificant space, and
// false when s is not a JSON object.
func compactSchema(s []byte) ([]byte, bool) {
	schemas.Lock()
	c, ok := schemas.m[string(s)]
	schemas.Unlock()
	if ok {
		return c, true
	}
	if s[0] != '{' || !json.Valid(s) {
		return nil, false
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, s); err != nil {
		return nil, false
	}
	c = buf.Bytes()
	schemas.Lock()
	if len(schemas.m) >= maxSchemas {
		schemas.m = map[string][]byte{}
	}
	schemas.m[string(s)] = c
	schemas.Unlock()
	return c, true
}

// appendMessages appends toMessages' wire messages for m, each preceded by
// a comma unless *first.
func appendMessages(b []byte, m model.Message, first *bool) ([]byte, error) {
	sep := func(b []byte) []byte {
		if !*first {
			b = append(b, ',')
		}
		*first = false
		return b
	}
	switch m.Role {
	case model.RoleUser:
		texts, hasImage := 0, false
		for _, blk := range m.Content {
			switch blk.Type {
			case model.BlockText:
				texts++
			case model.BlockImage:
				if len(blk.Data) == 0 {
					return nil, errors.New("image block without data")
				}
				hasImage = true
			case model.BlockToolResult:
				text := blk.Text
				if blk.IsError {
					text = "ERROR: " + text // Chat Completions has no error flag on tool results
				}
				b = append(sep(b), `{"role":"tool","content":`...)
				b = appendString(b, text)
				b = append(b, `,"tool_call_id":`...)
				b = appendString(b, blk.ToolUseID)
				b = append(b, '}')
			default:
				return nil, fmt.Errorf("block type %q is not allowed in a user message", blk.Type)
			}
		}
		switch {
		case texts == 0 && !hasImage:
		case !hasImage:
			// Plain string content, the texts joined by newlines: the
			// widest compatibility (older Ollama and llama.cpp reject part
			// arrays).
			b = append(sep(b), `{"role":"user","content":"`...)
			k := 0
			for _, blk := range m.Content {
				if blk.Type == model.BlockText {
					if k > 0 {
						b = append(b, `\n`...)
					}
					b = appendStringBody(b, blk.Text)
					k++
				}
			}
			b = append(b, `"}`...)
		default:
			b = append(sep(b), `{"role":"user","content":[`...)
			k := 0
			for _, blk := range m.Content {
				if blk.Type != model.BlockText && blk.Type != model.BlockImage {
					continue
				}
				if k > 0 {
					b = append(b, ',')
				}
				k++
				if blk.Type == model.BlockText {
					b = append(b, `{"type":"text","text":`...)
					b = appendString(b, blk.Text)
					b = append(b, '}')
					continue
				}
				b = append(b, `{"type":"image_url","image_url":{"url":"data:`...)
				b = appendStringBody(b, blk.MediaType)
				b = append(b, ";base64,"...)
				b = base64.StdEncoding.AppendEncode(b, blk.Data)
				b = append(b, `"}}`...)
			}
			b = append(b, "]}"...)
		}
		return b, nil
	case model.RoleAssistant:
		calls := 0
		for _, blk := range m.Content {
			switch blk.Type {
			case model.BlockText:
			case model.BlockToolUse:
				calls++
			default:
				return nil, fmt.Errorf("block type %q is not allowed in an assistant message", blk.Type)
			}
		}
		b = append(sep(b), `{"role":"assistant"`...)
		hasText := false
		for _, blk := range m.Content {
			if blk.Type == model.BlockText && blk.Text != "" {
				hasText = true
			}
		}
		if hasText || calls == 0 {
			b = append(b, `,"content":"`...)
			for _, blk := range m.Content {
				if blk.Type == model.BlockText {
					b = appendStringBody(b, blk.Text)
				}
			}
			b = append(b, '"')
		}
		if calls > 0 {
			b = append(b, `,"tool_calls":[`...)
			k := 0
			for _, blk := range m.Content {
				if blk.Type != model.BlockToolUse {
					continue
				}
				if k > 0 {
					b = append(b, ',')
				}
				k++
				args := string(blk.Input)
				if args == "" {
					args = "{}"
				}
				b = append(b, `{"id":`...)
				b = appendString(b, blk.ID)
				b = append(b, `,"type":"function","function":{"name":`...)
				b = appendString(b, blk.Name)
				b = append(b, `,"arguments":`...)
				b = appendString(b, args)
				b = append(b, "}}"...)
			}
			b = append(b, ']')
		}
		return append(b, '}'), nil
	default:
		return nil, fmt.Errorf("unknown role %q", m.Role)
	}
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendStringBody(b, s)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendStringBody appends s JSON-escaped, without the quotes, as
// encoding/json does with HTML escaping off: '"', '\\' and control
// characters escaped, invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
func appendStringBody(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}

// wireCompletion is the part of a Chat Completions response that Generate
// reads.
type wireCompletion struct {
	Model   string `json:"model"`
	Choices []struct {
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content   *string `json:"content"`
			Refusal   *string `json:"refusal"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

// decodeCompletion reads a response body. A body the strict decoder
// refuses (a server sending a number where a string belongs) goes through
// the SDK's lenient decoder, as before. Errors: a wrapped
// model.ErrBadResponse for a body neither decodes or that has no choices.
func (p *Provider) decodeCompletion(body []byte) (*model.Response, error) {
	var wc wireCompletion
	if err := json.Unmarshal(body, &wc); err != nil {
		var cc openai.ChatCompletion
		if err := json.Unmarshal(body, &cc); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", model.ErrBadResponse, p.name, err)
		}
		return p.fromCompletion(&cc)
	}
	if len(wc.Choices) == 0 {
		return nil, fmt.Errorf("%w: %s: response has no choices", model.ErrBadResponse, p.name)
	}
	ch := wc.Choices[0]
	a := answer{model: wc.Model, finish: ch.FinishReason,
		usage: model.Usage{InputTokens: int(wc.Usage.PromptTokens), OutputTokens: int(wc.Usage.CompletionTokens)}}
	if ch.Message.Content != nil {
		a.content = *ch.Message.Content
	}
	if ch.Message.Refusal != nil {
		a.refusal = *ch.Message.Refusal
	}
	for _, tc := range ch.Message.ToolCalls {
		a.calls = append(a.calls, toolCall{id: tc.ID, typ: tc.Type, name: tc.Function.Name, args: tc.Function.Arguments})
	}
	return a.response(), nil
}
