package accelerator.jvm;

import java.lang.reflect.Field;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.Lock;

import py4j.DefaultGatewayServerListener;
import py4j.GatewayServer;
import py4j.Py4JServerConnection;

/**
 * Turns off Nagle's algorithm on the driver's py4j connections, the open ones and every one
 * opened later (each Python thread has its own).
 *
 * <p>py4j writes an answer of more than 8 KB in two socket writes; with Nagle's algorithm on,
 * the second waits for the Python side's delayed acknowledgement, about 40 ms on Linux. Every
 * index log entry, history file or manifest of more than about 6 KB that the accelerator reads
 * through py4j paid that wait (py4j issue 516, fixed upstream after the py4j that Spark ships).
 */
public final class Py4jNoDelay extends DefaultGatewayServerListener {

  @Override
  public void connectionStarted(Py4JServerConnection connection) {
    apply(connection);
  }

  /**
   * Applies to the open connections of {@code server} and registers for the later ones, once
   * per server; returns how many open connections it changed.
   */
  public int install(GatewayServer server) {
    for (Object l : server.getListeners()) {
      if (l instanceof Py4jNoDelay) {
        return 0;
      }
    }
    server.addListener(this);
    int changed = 0;
    for (Py4JServerConnection c : open(server)) {
      changed += apply(c) ? 1 : 0;
    }
    return changed;
  }

  private static List<Py4JServerConnection> open(GatewayServer server) {
    List<Py4JServerConnection> out = new ArrayList<>();
    try {
      Field list = GatewayServer.class.getDeclaredField("connections");
      Field guard = GatewayServer.class.getDeclaredField("lock");
      list.setAccessible(true);
      guard.setAccessible(true);
      Lock lock = (Lock) guard.get(server);   // the server changes its list under this lock
      Object[] connections;
      lock.lock();
      try {
        connections = ((List<?>) list.get(server)).toArray();
      } finally {
        lock.unlock();
      }
      for (Object c : connections) {
        if (c instanceof Py4JServerConnection) {
          out.add((Py4JServerConnection) c);
        }
      }
    } catch (ReflectiveOperationException | RuntimeException e) {
      // another py4j layout: only the connections opened from now on are changed
    }
    return out;
  }

  private static boolean apply(Py4JServerConnection connection) {
    try {
      Socket socket = connection.getSocket();
      if (socket != null && !socket.isClosed() && !socket.getTcpNoDelay()) {
        socket.setTcpNoDelay(true);
        return true;
      }
    } catch (Exception e) {
      // a connection closing meanwhile keeps its setting
    }
    return false;
  }
}
