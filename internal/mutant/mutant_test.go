package mutant

import "testing"

// TestOffIsInert: in a build without weir_mutants no planted bug can be
// activated (M1); with the tag, exactly the one set is on (M2).
func TestOffIsInert(t *testing.T) {
	for _, m := range All {
		err := Set(m.Name)
		if Enabled != (err == nil) {
			t.Fatalf("Set(%q) = %v in a build with Enabled %v", m.Name, err, Enabled)
		}
		for _, o := range All {
			if got, want := On(o.Name), Enabled && o.Name == m.Name; got != want {
				t.Fatalf("after Set(%q): On(%q) = %v, want %v", m.Name, o.Name, got, want)
			}
		}
	}
	if err := Set("no-such-mutant"); err == nil {
		t.Fatal("Set accepted an unknown name")
	}
	if err := Set(""); err != nil {
		t.Fatal(err)
	}
}
