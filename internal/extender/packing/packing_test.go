package packing

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

const gi = int64(1) << 30

func TestPack(t *testing.T) {
	tests := []struct {
		name  string
		items []Item
		bins  []Bin
		// want is the expected assignment; nil means the items do not fit.
		want map[string]string
		// wantReason is the expected reason when the items do not fit.
		wantReason string
		// backtracks is true when best fit alone fails, so the search must
		// try more placements than there are items.
		backtracks bool
	}{
		{
			name:  "exact fit",
			items: []Item{{Name: "pvc-a", Size: 100 * gi}},
			bins:  []Bin{{Name: "disk-1", Free: 100 * gi}},
			want:  map[string]string{"pvc-a": "disk-1"},
		},
		{
			name:       "one byte over",
			items:      []Item{{Name: "pvc-a", Size: 100*gi + 1}},
			bins:       []Bin{{Name: "disk-1", Free: 100 * gi}, {Name: "disk-2", Free: 50 * gi}},
			wantReason: "volume pvc-a needs 107374182401, largest free disk disk-1 has 100Gi",
		},
		{
			name:       "one byte over together",
			items:      []Item{{Name: "pvc-a", Size: 50 * gi}, {Name: "pvc-b", Size: 50*gi + 1}},
			bins:       []Bin{{Name: "disk-1", Free: 100 * gi}},
			wantReason: "volumes need 107374182401 together, disks hold 100Gi free in all",
		},
		{
			name: "several volumes share a disk",
			items: []Item{
				{Name: "pvc-a", Size: 30 * gi},
				{Name: "pvc-b", Size: 30 * gi},
				{Name: "pvc-c", Size: 40 * gi},
			},
			bins: []Bin{{Name: "disk-1", Free: 100 * gi}, {Name: "disk-2", Free: 20 * gi}},
			want: map[string]string{"pvc-a": "disk-1", "pvc-b": "disk-1", "pvc-c": "disk-1"},
		},
		{
			name: "two disks of 5 take 3, 3, 2, 2",
			items: []Item{
				{Name: "a", Size: 3}, {Name: "b", Size: 3}, {Name: "c", Size: 2}, {Name: "d", Size: 2},
			},
			bins: []Bin{{Name: "disk-1", Free: 5}, {Name: "disk-2", Free: 5}},
			want: map[string]string{"a": "disk-1", "b": "disk-2", "c": "disk-1", "d": "disk-2"},
		},
		{
			name: "greedy fails, backtracking solves",
			// Best fit and first fit both put the 4 on disk-1 and then
			// cannot place the third 3; the only packing is 4+3 and 3+3.
			items: []Item{
				{Name: "a", Size: 4}, {Name: "b", Size: 3}, {Name: "c", Size: 3}, {Name: "d", Size: 3},
			},
			bins:       []Bin{{Name: "disk-1", Free: 6}, {Name: "disk-2", Free: 7}},
			want:       map[string]string{"a": "disk-2", "b": "disk-1", "c": "disk-1", "d": "disk-2"},
			backtracks: true,
		},
		{
			name: "selectors force the assignment",
			items: []Item{
				{Name: "plain", Size: 100 * gi},
				{Name: "ssd", Size: 100 * gi, Selector: []string{"ssd"}},
				{Name: "fast-ssd", Size: 50 * gi, Selector: []string{"fast", "ssd"}},
			},
			bins: []Bin{
				{Name: "disk-a", Free: 100 * gi, Tags: []string{"ssd"}},
				{Name: "disk-b", Free: 100 * gi, Tags: []string{"hdd"}},
				{Name: "disk-c", Free: 50 * gi, Tags: []string{"ssd", "fast"}},
			},
			want: map[string]string{"plain": "disk-b", "ssd": "disk-a", "fast-ssd": "disk-c"},
		},
		{
			name: "selector matches no disk",
			items: []Item{
				{Name: "pvc-a", Size: gi, Selector: []string{"nvme", "fast"}},
			},
			bins:       []Bin{{Name: "disk-1", Free: 100 * gi, Tags: []string{"fast"}}},
			wantReason: "volume pvc-a needs a disk with tags [fast nvme], none of 1 disks has them",
		},
		{
			name: "matching disk too small",
			items: []Item{
				{Name: "pvc-a", Size: 10 * gi, Selector: []string{"ssd"}},
			},
			bins: []Bin{
				{Name: "disk-1", Free: 100 * gi},
				{Name: "disk-2", Free: 5 * gi, Tags: []string{"ssd"}},
			},
			wantReason: "volume pvc-a needs 10Gi, largest free disk with tags [ssd] disk-2 has 5Gi",
		},
		{
			name: "volumes with a selector need more than their disks hold",
			items: []Item{
				{Name: "pvc-a", Size: 60 * gi, Selector: []string{"ssd"}},
				{Name: "pvc-b", Size: 60 * gi, Selector: []string{"ssd"}},
				{Name: "pvc-c", Size: gi},
			},
			bins: []Bin{
				{Name: "disk-1", Free: 100 * gi, Tags: []string{"ssd"}},
				{Name: "disk-2", Free: 500 * gi},
			},
			wantReason: "volumes pvc-a, pvc-b need 120Gi together, the disks they can use (disk-1) hold 100Gi free in all",
		},
		{
			name: "no placement although sizes and sums fit",
			items: []Item{
				{Name: "a", Size: 4}, {Name: "b", Size: 4}, {Name: "c", Size: 2},
			},
			bins:       []Bin{{Name: "disk-1", Free: 5}, {Name: "disk-2", Free: 5}},
			wantReason: "no placement fits 3 volumes (10 in all, largest 4) onto the 2 disks they can use (10 free in all, largest 5)",
		},
		{
			name: "listed disks restrict a volume",
			// Without the lists the best fit puts pvc-a on disk-1; disk-1 is
			// not one of pvc-a's disks.
			items: []Item{
				{Name: "pvc-a", Size: 40 * gi, Disks: []string{"disk-2"}},
				{Name: "pvc-b", Size: 40 * gi, Disks: []string{"disk-1", "disk-2"}},
			},
			bins: []Bin{{Name: "disk-1", Free: 50 * gi}, {Name: "disk-2", Free: 60 * gi}},
			want: map[string]string{"pvc-a": "disk-2", "pvc-b": "disk-1"},
		},
		{
			name: "listed disks and selector both apply",
			items: []Item{
				{Name: "pvc-a", Size: gi, Selector: []string{"ssd"}, Disks: []string{"disk-1", "disk-2"}},
			},
			bins: []Bin{
				{Name: "disk-1", Free: 100 * gi},
				{Name: "disk-2", Free: 100 * gi, Tags: []string{"ssd"}},
				{Name: "disk-3", Free: 100 * gi, Tags: []string{"ssd"}},
			},
			want: map[string]string{"pvc-a": "disk-2"},
		},
		{
			name:       "no listed disk",
			items:      []Item{{Name: "pvc-a", Size: gi, Disks: []string{}}},
			bins:       []Bin{{Name: "disk-1", Free: 100 * gi}},
			wantReason: "volume pvc-a can use none of 1 disks",
		},
		{
			name:       "listed disk too small",
			items:      []Item{{Name: "pvc-a", Size: 10 * gi, Disks: []string{"disk-2"}}},
			bins:       []Bin{{Name: "disk-1", Free: 100 * gi}, {Name: "disk-2", Free: 5 * gi}},
			wantReason: "volume pvc-a needs 10Gi, largest free usable disk disk-2 has 5Gi",
		},
		{
			name: "zero and negative sizes fit anywhere",
			items: []Item{
				{Name: "a", Size: 0}, {Name: "b", Size: -5},
			},
			bins: []Bin{{Name: "disk-1", Free: -1}},
			want: map[string]string{"a": "disk-1", "b": "disk-1"},
		},
		{
			name: "no items, no bins",
			want: map[string]string{},
		},
		{
			name: "no items",
			bins: []Bin{{Name: "disk-1", Free: gi}},
			want: map[string]string{},
		},
		{
			name:       "no bins",
			items:      []Item{{Name: "pvc-a", Size: gi}},
			wantReason: "volume pvc-a needs 1Gi, no disk is available",
		},
		{
			name:       "duplicate volume",
			items:      []Item{{Name: "pvc-a", Size: gi}, {Name: "pvc-a", Size: gi}},
			bins:       []Bin{{Name: "disk-1", Free: 100 * gi}},
			wantReason: `volume name "pvc-a" appears more than once`,
		},
		{
			name:       "duplicate disk",
			items:      []Item{{Name: "pvc-a", Size: gi}},
			bins:       []Bin{{Name: "disk-1", Free: 100 * gi}, {Name: "disk-1", Free: 100 * gi}},
			wantReason: `disk name "disk-1" appears more than once`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Pack(tt.items, tt.bins, DefaultBudget)
			if !got.Exact {
				t.Errorf("Exact = false, want true")
			}
			if got.Fits != (tt.want != nil) {
				t.Fatalf("Fits = %v, want %v (reason %q)", got.Fits, tt.want != nil, got.Reason)
			}
			if !reflect.DeepEqual(got.Assignment, tt.want) {
				t.Errorf("Assignment = %v, want %v", got.Assignment, tt.want)
			}
			if got.Reason != tt.wantReason {
				t.Errorf("Reason = %q, want %q", got.Reason, tt.wantReason)
			}
			if tt.backtracks && got.Steps <= len(tt.items) {
				t.Errorf("Steps = %d, want more than %d (backtracking)", got.Steps, len(tt.items))
			}
			if got.Fits {
				checkValid(t, tt.items, tt.bins, got.Assignment)
			}
		})
	}
}

// TestPackMultiPVC is the multi-PVC case of the extender proposal: a pod with
// four 100Gi volumes fits only the node with four 100Gi disks.
func TestPackMultiPVC(t *testing.T) {
	var items []Item
	for i := range 4 {
		items = append(items, Item{Name: fmt.Sprintf("pvc-%d", i), Size: 100 * gi})
	}
	for disks := 1; disks <= 4; disks++ {
		var bins []Bin
		for i := range disks {
			bins = append(bins, Bin{Name: fmt.Sprintf("disk-%d", i), Free: 100 * gi})
		}
		got := Pack(items, bins, DefaultBudget)
		if got.Fits != (disks == 4) {
			t.Errorf("node with %d disks: Fits = %v, want %v", disks, got.Fits, disks == 4)
		}
		if disks < 4 {
			want := fmt.Sprintf("volumes need 400Gi together, disks hold %dGi free in all", 100*disks)
			if got.Reason != want {
				t.Errorf("node with %d disks: Reason = %q, want %q", disks, got.Reason, want)
			}
			continue
		}
		checkValid(t, items, bins, got.Assignment)
		used := map[string]bool{}
		for _, disk := range got.Assignment {
			used[disk] = true
		}
		if len(used) != 4 {
			t.Errorf("node with 4 disks: assignment %v does not use every disk", got.Assignment)
		}
	}
}

// TestPackOrderIndependent checks that shuffling items, bins and tags does not
// change the result.
func TestPackOrderIndependent(t *testing.T) {
	items := []Item{
		{Name: "a", Size: 4, Selector: []string{"x"}},
		{Name: "b", Size: 3},
		{Name: "c", Size: 3, Selector: []string{"x", "y"}},
		{Name: "d", Size: 3, Disks: []string{"disk-3", "disk-2", "disk-4"}},
		{Name: "e", Size: 1},
	}
	bins := []Bin{
		{Name: "disk-1", Free: 6, Tags: []string{"x", "y"}},
		{Name: "disk-2", Free: 7, Tags: []string{"x"}},
		{Name: "disk-3", Free: 3},
		{Name: "disk-4", Free: 3, Tags: []string{"y", "x"}},
	}
	want := Pack(items, bins, DefaultBudget)
	if !want.Fits {
		t.Fatalf("Fits = false (%s), want true", want.Reason)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		is, bs := slices.Clone(items), slices.Clone(bins)
		rng.Shuffle(len(is), func(i, j int) { is[i], is[j] = is[j], is[i] })
		rng.Shuffle(len(bs), func(i, j int) { bs[i], bs[j] = bs[j], bs[i] })
		for k := range is {
			is[k].Disks = slices.Clone(is[k].Disks)
			rng.Shuffle(len(is[k].Disks), func(i, j int) { is[k].Disks[i], is[k].Disks[j] = is[k].Disks[j], is[k].Disks[i] })
		}
		if got := Pack(is, bs, DefaultBudget); !reflect.DeepEqual(got, want) {
			t.Fatalf("Pack(%v, %v) = %+v, want %+v", is, bs, got, want)
		}
	}
}

// TestPackMatchesBruteForce compares Pack with an enumeration of all
// assignments on random small instances.
func TestPackMatchesBruteForce(t *testing.T) {
	const seed = 20240611
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	n := 20000
	if testing.Short() {
		n = 10000
	}
	fits := 0
	for i := range n {
		items, bins := randomInstance(rng)
		got := Pack(items, bins, DefaultBudget)
		want := bruteForce(items, bins)
		if got.Fits != want || !got.Exact {
			t.Fatalf("instance %d: Pack(%+v, %+v) = %+v, brute force fits = %v", i, items, bins, got, want)
		}
		if got.Fits {
			fits++
			checkValid(t, items, bins, got.Assignment)
		} else if got.Reason == "" {
			t.Fatalf("instance %d: no reason for %+v", i, got)
		}
		// The same instance in another order gives the same result.
		rng.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
		rng.Shuffle(len(bins), func(i, j int) { bins[i], bins[j] = bins[j], bins[i] })
		if again := Pack(items, bins, DefaultBudget); !reflect.DeepEqual(again, got) {
			t.Fatalf("instance %d: shuffled result %+v, want %+v", i, again, got)
		}
	}
	t.Logf("%d of %d instances fit", fits, n)
	if fits < n/10 || fits > n*9/10 {
		t.Errorf("%d of %d instances fit; the generator should produce both outcomes often", fits, n)
	}
}

// TestPackBudget checks that a hard instance stops at the budget and lets
// the greedy fallback decide.
func TestPackBudget(t *testing.T) {
	items, bins := hardInstance()
	for _, budget := range []int{1, 10, 1000, 5000} {
		start := time.Now()
		got := Pack(items, bins, budget)
		elapsed := time.Since(start)
		if got.Exact {
			t.Errorf("budget %d: Exact = true after %d steps, want false", budget, got.Steps)
		}
		if got.Fits {
			t.Errorf("budget %d: Fits = true, want false", budget)
		}
		if got.Steps > budget {
			t.Errorf("budget %d: Steps = %d", budget, got.Steps)
		}
		if !strings.HasPrefix(got.Reason, fmt.Sprintf("search gave up after %d steps and first-fit-decreasing placement left no room for volume", got.Steps)) {
			t.Errorf("budget %d: Reason = %q", budget, got.Reason)
		}
		if elapsed > time.Second {
			t.Errorf("budget %d: took %v", budget, elapsed)
		}
	}
}

// TestPackBudgetGreedyFits checks that the fallback can still say "fits".
func TestPackBudgetGreedyFits(t *testing.T) {
	items := []Item{{Name: "a", Size: 4}, {Name: "b", Size: 4}, {Name: "c", Size: 1}}
	bins := []Bin{{Name: "disk-1", Free: 5}, {Name: "disk-2", Free: 5}}
	got := Pack(items, bins, 1)
	if got.Exact || !got.Fits || got.Steps != 1 || got.Reason != "" {
		t.Fatalf("Pack = %+v, want a greedy fit after 1 step", got)
	}
	checkValid(t, items, bins, got.Assignment)
}

// hardInstance returns 30 items that barely do not fit onto 3 bins: they
// need 1470 bytes and the bins hold 1471, but every size is even and every
// bin's free space odd, so each bin leaves at least one byte unused.
func hardInstance() ([]Item, []Bin) {
	var items []Item
	for i := range 30 {
		items = append(items, Item{Name: fmt.Sprintf("pvc-%02d", i), Size: int64(20 + 2*i)})
	}
	bins := []Bin{
		{Name: "disk-1", Free: 491},
		{Name: "disk-2", Free: 491},
		{Name: "disk-3", Free: 489},
	}
	return items, bins
}

func TestHardInstance(t *testing.T) {
	items, bins := hardInstance()
	var need, hold int64
	for _, it := range items {
		if it.Size%2 != 0 {
			t.Fatalf("item %+v breaks the construction", it)
		}
		need += it.Size
	}
	for _, b := range bins {
		if b.Free%2 != 1 {
			t.Fatalf("bin %+v breaks the construction", b)
		}
		hold += b.Free - 1
	}
	if need <= hold {
		t.Fatalf("items need %d, bins hold %d usable bytes: the instance fits", need, hold)
	}
}

func FuzzPack(f *testing.F) {
	f.Add([]byte{4, 4, 100, 0, 100, 0, 100, 0, 100, 0, 100, 0, 100, 0, 100, 0, 100, 0, 0, 0})
	f.Add([]byte{4, 2, 4, 0, 3, 0, 3, 0, 3, 0, 6, 0, 7, 0, 0, 0})
	f.Add([]byte{3, 3, 50, 3, 100, 1, 100, 0, 100, 1, 100, 2, 50, 3, 2, 0})
	f.Add([]byte{6, 3, 255, 7, 255, 7, 1, 1, 2, 2, 3, 3, 4, 4, 200, 7, 100, 3, 50, 1, 5, 1})
	f.Add([]byte{2, 2, 40, 0x80 | 0x10, 40, 0x80 | 0x18, 50, 0, 60, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		items, bins, budget := decodeInstance(data)
		got := Pack(items, bins, budget)
		if got.Steps > budget {
			t.Fatalf("Steps = %d over budget %d", got.Steps, budget)
		}
		if got.Fits {
			if got.Reason != "" {
				t.Fatalf("fits with reason %q", got.Reason)
			}
			checkValid(t, items, bins, got.Assignment)
		} else if got.Reason == "" || got.Assignment != nil {
			t.Fatalf("does not fit but %+v", got)
		}
		want := bruteForce(items, bins)
		if got.Exact && got.Fits != want {
			t.Fatalf("Pack(%+v, %+v) = %+v, brute force fits = %v", items, bins, got, want)
		}
		if !got.Exact && got.Fits && !want {
			t.Fatalf("greedy fits where brute force does not: %+v", got)
		}
	})
}

// decodeInstance turns bytes into at most 6 items and 6 bins: a count byte
// for each, then per item a size byte and a selector bit mask, per bin a free
// byte and a tag bit mask, then a budget byte. Missing bytes read as zero.
// An item's mask with bit 7 set also lists its disks: bin i when bit 3+i%4
// is set.
func decodeInstance(data []byte) ([]Item, []Bin, int) {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	tagsOf := func(mask byte) []string {
		var tags []string
		for i, tag := range []string{"a", "b", "c"} {
			if mask&(1<<i) != 0 {
				tags = append(tags, tag)
			}
		}
		return tags
	}
	nItems, nBins := int(next()%7), int(next()%7)
	items := make([]Item, nItems)
	for i := range items {
		size := int64(next())
		if size == 255 {
			size = math.MaxInt64 // exercises the saturating sums
		}
		mask := next()
		items[i] = Item{Name: fmt.Sprintf("pvc-%d", i), Size: size, Selector: tagsOf(mask)}
		if mask&0x80 != 0 {
			items[i].Disks = []string{}
			for b := range nBins {
				if mask&(1<<(3+b%4)) != 0 {
					items[i].Disks = append(items[i].Disks, fmt.Sprintf("disk-%d", b))
				}
			}
		}
	}
	bins := make([]Bin, nBins)
	for i := range bins {
		free := int64(next())
		if free == 255 {
			free = math.MaxInt64
		}
		bins[i] = Bin{Name: fmt.Sprintf("disk-%d", i), Free: free, Tags: tagsOf(next())}
	}
	budget := int(next())
	if budget == 0 {
		budget = DefaultBudget
	}
	return items, bins, budget
}

func BenchmarkPack(b *testing.B) {
	b.Run("4 volumes on 4 disks", func(b *testing.B) {
		var items []Item
		var bins []Bin
		for i := range 4 {
			items = append(items, Item{Name: fmt.Sprintf("pvc-%d", i), Size: 100 * gi})
			bins = append(bins, Bin{Name: fmt.Sprintf("disk-%d", i), Free: 100 * gi})
		}
		benchmarkPack(b, items, bins)
	})
	b.Run("8 volumes on 16 disks", func(b *testing.B) {
		var items []Item
		for i, size := range []int64{60, 50, 45, 40, 35, 30, 20, 10} {
			it := Item{Name: fmt.Sprintf("pvc-%d", i), Size: size * gi}
			if i%3 == 0 {
				it.Selector = []string{"ssd"}
			}
			items = append(items, it)
		}
		var bins []Bin
		for i := range 16 {
			bin := Bin{Name: fmt.Sprintf("disk-%02d", i), Free: int64(20+(i*37)%60) * gi}
			if i%4 == 0 {
				bin.Tags = []string{"ssd"}
			}
			bins = append(bins, bin)
		}
		benchmarkPack(b, items, bins)
	})
}

func benchmarkPack(b *testing.B, items []Item, bins []Bin) {
	b.Helper()
	if r := Pack(items, bins, DefaultBudget); !r.Fits || !r.Exact {
		b.Fatalf("benchmark instance should fit exactly: %+v", r)
	}
	b.ReportAllocs()
	for b.Loop() {
		Pack(items, bins, DefaultBudget)
	}
}

// randomInstance returns up to 6 items and 6 bins with small sizes and tags
// from {x, y}.
func randomInstance(rng *rand.Rand) ([]Item, []Bin) {
	tags := func() []string {
		var ts []string
		for _, tag := range []string{"x", "y"} {
			if rng.IntN(3) == 0 {
				ts = append(ts, tag)
			}
		}
		return ts
	}
	items := make([]Item, rng.IntN(7))
	for i := range items {
		items[i] = Item{Name: fmt.Sprintf("pvc-%d", i), Size: rng.Int64N(9)}
		if rng.IntN(2) == 0 {
			items[i].Selector = tags()
		}
	}
	bins := make([]Bin, rng.IntN(7))
	for i := range items {
		if rng.IntN(4) == 0 {
			items[i].Disks = []string{}
			for b := range bins {
				if rng.IntN(3) != 0 {
					items[i].Disks = append(items[i].Disks, fmt.Sprintf("disk-%d", b))
				}
			}
		}
	}
	for i := range bins {
		bins[i] = Bin{Name: fmt.Sprintf("disk-%d", i), Free: rng.Int64N(16), Tags: tags()}
		if rng.IntN(2) == 0 {
			bins[i].Tags = append(bins[i].Tags, "x")
		}
	}
	return items, bins
}

// TestPackOneItemAsTheSearch: the one-volume shortcut answers what the
// search answers.
func TestPackOneItemAsTheSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	fits := 0
	for range 20000 {
		items, bins := randomInstance(rng)
		if len(items) == 0 {
			continue
		}
		items = items[:1]
		got, want := Pack(items, bins, 0), packBySearch(items, bins, DefaultBudget)
		if got.Fits != want.Fits || got.Reason != want.Reason || !maps.Equal(got.Assignment, want.Assignment) {
			t.Fatalf("items %+v, bins %+v: Pack = %+v, the search = %+v", items, bins, got, want)
		}
		if got.Fits {
			fits++
		}
	}
	if fits == 0 {
		t.Fatal("no instance fitted: the comparison covered only failures")
	}
}

// bruteForce reports whether some assignment of items to bins is valid, by
// trying every bin for every item.
func bruteForce(items []Item, bins []Bin) bool {
	free := make([]int64, len(bins))
	for i, b := range bins {
		free[i] = max(b.Free, 0)
	}
	var try func(k int) bool
	try = func(k int) bool {
		if k == len(items) {
			return true
		}
		size := max(items[k].Size, 0)
		for b := range bins {
			if free[b] < size || !allowed(items[k], bins[b]) {
				continue
			}
			free[b] -= size
			ok := try(k + 1)
			free[b] += size
			if ok {
				return true
			}
		}
		return false
	}
	return try(0)
}

// checkValid fails the test unless assignment places every item on one
// compatible bin and no bin holds more than its free space.
func checkValid(t *testing.T, items []Item, bins []Bin, assignment map[string]string) {
	t.Helper()
	if len(assignment) != len(items) {
		t.Fatalf("assignment %v has %d entries for %d items", assignment, len(assignment), len(items))
	}
	byName := map[string]Bin{}
	for _, b := range bins {
		byName[b.Name] = b
	}
	used := map[string]int64{}
	for _, it := range items {
		name, ok := assignment[it.Name]
		if !ok {
			t.Fatalf("item %s is not assigned in %v", it.Name, assignment)
		}
		bin, ok := byName[name]
		if !ok {
			t.Fatalf("item %s is assigned to unknown bin %q", it.Name, name)
		}
		if !allowed(it, bin) {
			t.Fatalf("item %s with selector %v and disks %v is on bin %s with tags %v", it.Name, it.Selector, it.Disks, bin.Name, bin.Tags)
		}
		size := max(it.Size, 0)
		if used[name] > max(bin.Free, 0)-size {
			t.Fatalf("bin %s over its free space %d in %v", name, bin.Free, assignment)
		}
		used[name] += size
	}
}

// allowed reports whether item may use bin: its tags include the selector
// and, when the item lists disks, the bin is listed. The tests use it
// instead of the package's own matching.
func allowed(it Item, bin Bin) bool {
	return hasAll(bin.Tags, it.Selector) && (it.Disks == nil || slices.Contains(it.Disks, bin.Name))
}

// hasAll reports whether tags include every wanted tag.
func hasAll(tags, wanted []string) bool {
	for _, w := range wanted {
		if !slices.Contains(tags, w) {
			return false
		}
	}
	return true
}
