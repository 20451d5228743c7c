package scenario

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// objects is the latest version of each object observed, by namespace/name.
type objects map[string]client.Object

// observe lists the objects of list's kind in namespace ("" for every
// namespace) and then watches them, calling check with the latest version
// of every object after the list and after each change, until check
// returns true or ctx ends. A watch that ends or expires is resumed from a
// new list, so check sees every change, though not every intermediate
// version across such a gap.
func observe(ctx context.Context, c client.WithWatch, list client.ObjectList, namespace string, check func(objects) bool) error {
	for {
		fresh := list.DeepCopyObject().(client.ObjectList)
		if err := c.List(ctx, fresh, client.InNamespace(namespace)); err != nil {
			return fmt.Errorf("listing %T: %w", list, err)
		}
		items, err := meta.ExtractList(fresh)
		if err != nil {
			return fmt.Errorf("reading %T: %w", list, err)
		}
		objs := objects{}
		for _, item := range items {
			obj := item.(client.Object)
			objs[key(obj)] = obj
		}
		if check(objs) {
			return nil
		}
		done, err := watchFrom(ctx, c, list, namespace, fresh.GetResourceVersion(), objs, check)
		if err != nil || done {
			return err
		}
	}
}

// watchFrom watches from resourceVersion rv, updating objs and calling
// check after each change. It returns false, nil when the watch ended and
// must be resumed from a new list.
func watchFrom(ctx context.Context, c client.WithWatch, list client.ObjectList, namespace, rv string,
	objs objects, check func(objects) bool) (bool, error) {
	w, err := c.Watch(ctx, list.DeepCopyObject().(client.ObjectList), &client.ListOptions{
		Namespace: namespace,
		Raw:       &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true},
	})
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return false, nil
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, fmt.Errorf("watching %T: %w", list, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, ctx.Err()
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				obj := ev.Object.(client.Object)
				objs[key(obj)] = obj
			case watch.Deleted:
				delete(objs, key(ev.Object.(client.Object)))
			case watch.Bookmark:
				continue
			case watch.Error:
				return false, nil // expired or failed: list again
			}
			if check(objs) {
				return true, nil
			}
		}
	}
}

func key(obj client.Object) string { return obj.GetNamespace() + "/" + obj.GetName() }

// watched is one list observe keeps up to date for waitAll.
type watched struct {
	list      client.ObjectList
	namespace string
}

// waitAll observes several lists at once until check, given the latest
// objects of each list in order, returns true, or timeout passes. check
// also returns a description of the state, which the error on timeout
// carries.
func waitAll(ctx context.Context, timeout time.Duration, c client.WithWatch, lists []watched, check func([]objects) (bool, string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var mu sync.Mutex
	current := make([]objects, len(lists))
	state := "not listed yet"
	done := false
	evaluate := func() {
		for _, objs := range current {
			if objs == nil {
				return
			}
		}
		done, state = check(current)
		if done {
			cancel()
		}
	}
	errs := make([]error, len(lists))
	var wg sync.WaitGroup
	for i, l := range lists {
		wg.Go(func() {
			errs[i] = observe(ctx, c, l.list, l.namespace, func(objs objects) bool {
				mu.Lock()
				defer mu.Unlock()
				// A copy: observe goes on changing objs while other lists' checks read it.
				current[i] = maps.Clone(objs)
				evaluate()
				return done
			})
		})
	}
	wg.Wait()
	if done {
		return nil
	}
	return fmt.Errorf("%s: %w", state, errors.Join(errs...))
}
