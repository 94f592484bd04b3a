/// The C API of request metrics and placeholders (0.5.0): pxl_result_metrics reads the
/// record `withResult` keeps while a final callback runs (`ResultRecord`); the placeholder
/// functions wrap `Placeholder`.
import CPixload
import PixloadCore

// MARK: - Metrics

@c @implementation public func pxl_result_metrics(_ result: UnsafePointer<pxl_result>?,
                                                  _ metrics: UnsafeMutablePointer<pxl_metrics>?) -> pxl_status {
  guard let result, let metrics else { return PXL_E_INVALID_ARGUMENT }
  let declared = UnsafeRawPointer(metrics).loadUnaligned(as: Int.self)
  guard declared >= metricsSize05, declared <= 1 << 16 else { return PXL_E_INVALID_ARGUMENT }
  guard let found = ResultRecord.find(UnsafeRawPointer(result)) else { return PXL_E_NOT_FOUND }
  _ = writeGrowableStruct(cMetrics(found), to: metrics, minimumSize: metricsSize05)
  return PXL_OK
}

private let metricsSize05 = MemoryLayout<pxl_metrics>.offset(of: \pxl_metrics.delivered_bytes)! + 8

private func cMetrics(_ m: RequestMetrics) -> pxl_metrics {
  var c = pxl_metrics()
  c.struct_size = MemoryLayout<pxl_metrics>.stride
  c.tier = m.tier.rawValue
  c.joined = m.joined ? 1 : 0
  c.slot_wait_us = m.slotWaitMicroseconds
  c.dns_us = m.dnsMicroseconds
  c.connect_us = m.connectMicroseconds
  c.tls_us = m.tlsMicroseconds
  c.first_byte_us = m.firstByteMicroseconds
  c.transfer_us = m.transferMicroseconds
  c.disk_read_us = m.diskReadMicroseconds
  c.decode_us = m.decodeMicroseconds
  c.process_us = m.processMicroseconds
  c.queue_wait_us = m.queueWaitMicroseconds
  c.bytes_received = m.bytesReceived
  c.http_status = m.httpStatus
  c.http_version = m.httpVersion
  c.redirects = m.redirects
  c.connection_reused = m.connectionReused ? 1 : 0
  c.decoded_bytes = m.decodedBytes
  c.delivered_bytes = m.deliveredBytes
  c.worker_us = m.workerMicroseconds
  c.isolated = m.isolated ? 1 : 0
  c.other_us = m.otherMicroseconds
  c.total_us = m.totalMicroseconds
  c.after_last_byte_us = m.afterLastByteMicroseconds
  return c
}

// MARK: - Placeholders

/// The placeholder a pxl_request carries (0.5.0's fields, zero in older structs); false
/// for an unknown kind or a NULL hash with a length. A malformed hash, also one too long
/// to be a hash, is the table's to log when it draws the row.
func readPlaceholder(_ r: pxl_request, into request: inout ImageRequest) -> Bool {
  if r.placeholder_kind == 0 { return true }
  guard let kind = Placeholder.Kind(rawValue: r.placeholder_kind), r.placeholder != nil || r.placeholder_length == 0
  else { return false }
  request.placeholder = hash(kind, r.placeholder, r.placeholder_length)
  return true
}

/// The hash at pointer: of one longer than any hash only enough is copied for decoding to
/// refuse it as malformed. (length is a size_t: one past Int.max arrives negative.)
private func hash(_ kind: Placeholder.Kind, _ pointer: UnsafeRawPointer?, _ length: Int) -> Placeholder {
  let count = length < 0 ? Placeholder.maxHashBytes + 1 : min(length, Placeholder.maxHashBytes + 1)
  guard let pointer, count > 0 else { return Placeholder(kind: kind, bytes: []) }
  return Placeholder(kind: kind, bytes: Array(UnsafeRawBufferPointer(start: pointer, count: count)))
}

private func placeholder(_ kind: Int32, _ pointer: UnsafeRawPointer?, _ length: Int) -> Placeholder? {
  guard let kind = Placeholder.Kind(rawValue: kind), pointer != nil else { return nil }
  return hash(kind, pointer, length)
}

@c @implementation public func pxl_placeholder_decode(_ kind: Int32, _ pointer: UnsafeRawPointer?, _ length: Int,
                                                      _ width: Int32, _ height: Int32,
                                                      _ imageOut: UnsafeMutablePointer<OpaquePointer?>?) -> pxl_status {
  imageOut?.pointee = nil
  guard let imageOut, let hash = placeholder(kind, pointer, length) else { return PXL_E_INVALID_ARGUMENT }
  do {
    imageOut.pointee = retainedHandle(try hash.decode(width: Int(width), height: Int(height)))
    return PXL_OK
  } catch {
    return cStatus(error.status)
  }
}

@c @implementation public func pxl_placeholder_aspect_ratio(_ kind: Int32, _ pointer: UnsafeRawPointer?, _ length: Int,
                                                            _ ratioOut: UnsafeMutablePointer<Double>?) -> pxl_status {
  guard let ratioOut, let hash = placeholder(kind, pointer, length) else { return PXL_E_INVALID_ARGUMENT }
  do {
    ratioOut.pointee = try hash.aspectRatio()
    return PXL_OK
  } catch {
    return cStatus(error.status)
  }
}

@c @implementation public func pxl_placeholder_encode(_ kind: Int32, _ imageHandle: OpaquePointer?,
                                                      _ componentsX: Int32, _ componentsY: Int32,
                                                      _ out: UnsafeMutablePointer<UInt8>?, _ capacity: Int,
                                                      _ lengthOut: UnsafeMutablePointer<Int>?) -> pxl_status {
  lengthOut?.pointee = 0
  guard let kind = Placeholder.Kind(rawValue: kind), let source = image(imageHandle), let out, let lengthOut else {
    return PXL_E_INVALID_ARGUMENT
  }
  do {
    let hash = try Placeholder.encode(kind, image: source, componentsX: Int(componentsX), componentsY: Int(componentsY))
    let terminator = kind == .blurHash ? 1 : 0
    guard hash.bytes.count + terminator <= capacity else { return PXL_E_INVALID_ARGUMENT }
    hash.bytes.withUnsafeBufferPointer { out.update(from: $0.baseAddress!, count: $0.count) }
    if terminator == 1 { out[hash.bytes.count] = 0 }
    lengthOut.pointee = hash.bytes.count
    return PXL_OK
  } catch {
    return cStatus(error.status)
  }
}
