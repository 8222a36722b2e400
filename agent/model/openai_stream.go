package model

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// chatChunk is one server-sent event of a streamed chat completion, as
// much of it as Response covers; Error is set when the server reports a
// failure inside the stream.
type chatChunk struct {
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   string `json:"content"`
			Refusal   string `json:"refusal"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// readStream assembles a streamed chat completion (data: lines, each a
// chunk, until data: [DONE] or the end of the body) into the answer a
// non-streaming call gives: the first choice's text and refusal
// concatenated, its tool calls by index with their arguments
// concatenated, the last finish reason, the usage chunk's counts. An
// error inside the stream fails the attempt (it is retried); a chunk that
// is not JSON is a malformed answer (it is not).
func (c *OpenAIClient) readStream(ctx context.Context, body io.Reader) (*Response, error) {
	sc := bufio.NewScanner(io.LimitReader(body, 64<<20))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var cc chatResponse
	cc.Choices = make([]struct {
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content   string         `json:"content"`
			Refusal   string         `json:"refusal"`
			ToolCalls []wireToolCall `json:"tool_calls"`
		} `json:"message"`
	}, 1)
	ch := &cc.Choices[0]
	var content, refusal strings.Builder
	var calls []wireToolCall
	var args []strings.Builder
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue // event names, comments, blank separators
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			break
		}
		var chunk chatChunk
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return nil, &PermanentError{fmt.Errorf("model: %s streamed a chunk that is not JSON: %w", c.baseURL, err)}
		}
		if chunk.Error != nil {
			return nil, fmt.Errorf("model: %s reported an error in the stream: %s", c.baseURL, chunk.Error.Message)
		}
		if chunk.Model != "" {
			cc.Model = chunk.Model
		}
		if u := chunk.Usage; u != nil {
			cc.Usage.PromptTokens, cc.Usage.CompletionTokens = u.PromptTokens, u.CompletionTokens
		}
		for _, choice := range chunk.Choices {
			if choice.Index != 0 {
				continue
			}
			content.WriteString(choice.Delta.Content)
			refusal.WriteString(choice.Delta.Refusal)
			for _, tc := range choice.Delta.ToolCalls {
				if tc.Index < 0 || tc.Index > 1024 {
					return nil, &PermanentError{fmt.Errorf("model: %s streamed a tool call with index %d", c.baseURL, tc.Index)}
				}
				for len(calls) <= tc.Index {
					calls = append(calls, wireToolCall{})
					args = append(args, strings.Builder{})
				}
				call := &calls[tc.Index]
				if tc.ID != "" {
					call.ID = tc.ID
				}
				if tc.Type != "" {
					call.Type = tc.Type
				}
				if tc.Function.Name != "" {
					call.Function.Name = tc.Function.Name
				}
				args[tc.Index].WriteString(tc.Function.Arguments)
			}
			if choice.FinishReason != "" {
				ch.FinishReason = choice.FinishReason
			}
		}
	}
	if err := sc.Err(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("model: call to %s: %w", c.baseURL, ctx.Err())
		}
		return nil, fmt.Errorf("model: reading the stream of %s: %w", c.baseURL, err)
	}
	ch.Message.Content, ch.Message.Refusal = content.String(), refusal.String()
	for i := range calls {
		calls[i].Function.Arguments = args[i].String()
	}
	ch.Message.ToolCalls = calls
	return c.response(&cc)
}
