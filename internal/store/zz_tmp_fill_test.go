package store

import (
	"os"
	"strconv"
)

func init() {
	if f, err := strconv.ParseFloat(os.Getenv("RECORDS_FILL"), 64); err == nil {
		recordsFill = f
	}
}
