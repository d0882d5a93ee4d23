package local

// UIDClash is uidClash, for the tests of package local_test.
var UIDClash = uidClash
var ParseListeners = parseListeners
