package catalog

import "slices"

// awsTypes are the AWS GPU instance types in the catalog: the graphics/
// inference G families (aws_g.go) and the training P families (aws_p.go).
var awsTypes = slices.Concat(awsGTypes, awsPTypes)
