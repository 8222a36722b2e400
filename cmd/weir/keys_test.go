package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/weirproject/weir/keygroup"
)

func TestPrintKeys(t *testing.T) {
	var buf bytes.Buffer
	if err := printKeys(&buf, 128, 4, "string", []string{"user_A", "user_B", "订单"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines: %q", len(lines), buf.String())
	}
	for i, k := range []string{"user_A", "user_B", "订单"} {
		var got keyLine
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatal(err)
		}
		kg := keygroup.Assign(keygroup.HashString(k), 128)
		if got.Key != k || got.KeyGroup != kg || got.Subtask != kg*4/128 {
			t.Fatalf("line %d: %+v, want key group %d", i, got, kg)
		}
		if r := keygroup.RangeFor(128, 4, got.Subtask); !r.Contains(got.KeyGroup) {
			t.Fatalf("subtask %d range %v does not hold key group %d", got.Subtask, r, got.KeyGroup)
		}
	}
	if err := printKeys(&buf, 128, 4, "int", []string{"x"}); err == nil {
		t.Fatal("want an error for a non-integer int key")
	}
	if err := printKeys(&buf, 128, 300, "string", []string{"x"}); err == nil {
		t.Fatal("want an error for parallelism above max parallelism")
	}
}
