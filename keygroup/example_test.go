package keygroup_test

import (
	"fmt"

	"github.com/weirproject/weir/keygroup"
)

func Example() {
	const maxP, p = 128, 4
	if err := keygroup.Validate(maxP, p); err != nil {
		panic(err)
	}
	h, _ := keygroup.HasherFor[string]()
	kg := keygroup.KeyGroupOf(h, "hello", maxP)
	sub := keygroup.OperatorIndex(kg, maxP, p)
	fmt.Println(kg, sub, keygroup.RangeFor(maxP, p, sub))
	// Output: 35 1 [32,63]
}

func ExampleValidate() {
	fmt.Println(keygroup.Validate(128, 300))
	// Output: keygroup: parallelism 300 exceeds max parallelism 128; raise the max parallelism (fixed for the life of the job's state)
}
