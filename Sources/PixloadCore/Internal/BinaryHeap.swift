/// A binary heap whose top is the element that comes first by `comesFirst`.
///
/// The work queues rank with it and remove cancelled or re-ranked elements lazily: they
/// stay in the heap as tombstones that the owner drops when they reach the top, and the
/// owner rebuilds the heap when tombstones outnumber live elements. So a cancel is O(1)
/// and a pick O(log n) amortized, where a linear search made mass cancels quadratic.
struct BinaryHeap<Element> {
  /// In heap order (the top first, the rest in no useful order).
  private(set) var elements: [Element] = []
  private let comesFirst: (Element, Element) -> Bool
  /// Comparisons made so far: a measure of work for tests that check complexity.
  private(set) var comparisons = 0

  init(comesFirst: @escaping (Element, Element) -> Bool) {
    self.comesFirst = comesFirst
  }

  var count: Int { elements.count }
  var isEmpty: Bool { elements.isEmpty }
  var top: Element? { elements.first }

  mutating func push(_ element: Element) {
    elements.append(element)
    siftUp(elements.count - 1)
  }

  @discardableResult
  mutating func popTop() -> Element? {
    guard !elements.isEmpty else { return nil }
    elements.swapAt(0, elements.count - 1)
    let top = elements.removeLast()
    if !elements.isEmpty { siftDown(0) }
    return top
  }

  mutating func removeAll() {
    elements.removeAll()
  }

  /// Replaces the contents with `newElements` in O(n) (Floyd's heap construction).
  mutating func rebuild(_ newElements: [Element]) {
    elements = newElements
    var index = elements.count / 2
    while index > 0 {
      index -= 1
      siftDown(index)
    }
  }

  private mutating func siftUp(_ start: Int) {
    var child = start
    while child > 0 {
      let parent = (child - 1) / 2
      comparisons += 1
      guard comesFirst(elements[child], elements[parent]) else { return }
      elements.swapAt(child, parent)
      child = parent
    }
  }

  private mutating func siftDown(_ start: Int) {
    var parent = start
    while true {
      let left = 2 * parent + 1
      guard left < elements.count else { return }
      var first = left
      let right = left + 1
      if right < elements.count {
        comparisons += 1
        if comesFirst(elements[right], elements[left]) { first = right }
      }
      comparisons += 1
      guard comesFirst(elements[first], elements[parent]) else { return }
      elements.swapAt(first, parent)
      parent = first
    }
  }
}
