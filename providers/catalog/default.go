package catalog

import (
	"fmt"
	"slices"
	"sync"
)

// instanceTypes is every bundled instance type, all providers.
func instanceTypes() []InstanceType {
	return slices.Concat(awsTypes, azureTypes, gcpTypes)
}

var defaultCatalog = sync.OnceValue(func() *Catalog {
	c, err := New(gpus, regions, instanceTypes(), sources)
	if err != nil {
		// The bundled data is part of the program; an inconsistency in it
		// is a programming error, not a runtime condition.
		panic(fmt.Sprintf("catalog: bundled data is inconsistent: %v", err))
	}
	return c
})

// Default returns the catalog built from the bundled figures. It is built
// once and shared; callers must not modify what it returns (its accessors
// return copies).
func Default() *Catalog { return defaultCatalog() }
