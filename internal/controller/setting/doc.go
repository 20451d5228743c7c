// Package setting reconciles Setting objects: it creates the scheduling
// settings that are missing with their defaults, and reports on each setting
// whether its value is valid (condition Valid, an Event when it is not).
package setting
