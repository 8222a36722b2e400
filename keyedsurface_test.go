package weir

import (
	"reflect"
	"testing"
)

// TestKeyedContextHidesTaskControl checks that a keyed function's context
// offers no task control: Yield and Fail belong to operators
// (runtime.Context), not to user functions, which return errors instead.
func TestKeyedContextHidesTaskControl(t *testing.T) {
	typ := reflect.TypeFor[*KeyedContext[string, int]]()
	for _, name := range []string{"Yield", "Fail"} {
		if _, ok := typ.MethodByName(name); ok {
			t.Errorf("KeyedContext has method %s; user functions must not control the task", name)
		}
	}
	if _, ok := typ.MethodByName("Collect"); !ok {
		t.Fatal("the method check is broken: KeyedContext.Collect not found")
	}
}
